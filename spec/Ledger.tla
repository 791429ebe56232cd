------------------------------- MODULE Ledger -------------------------------
(***************************************************************************)
(* At-most-once confirmations for MCP multi round-trip requests.           *)
(*                                                                         *)
(* A destructive tool call (the demo deletes a file) first returns         *)
(* input_required: the replica that handled it Issues an approval -- a     *)
(* pending record in its ledger store with a random id and an absolute     *)
(* expiry -- and hands the client a sealed requestState carrying that id   *)
(* and the same expiry.  The human answers; the client retries the call    *)
(* with the answer and the echoed state, to whichever replica the load     *)
(* balancer picks, as often as it likes.  On "accept" the replica Redeems  *)
(* the id: one atomic compare-and-set pending -> redeemed inside the       *)
(* store, which also checks expiry on the store's clock.  Only after a     *)
(* successful Redeem does that replica perform the effect, the deletion    *)
(* (DoEffect).  On "decline" it Cancels: pending -> cancelled, also        *)
(* atomically.                                                             *)
(*                                                                         *)
(* Modelled:                                                               *)
(*  - several Clients retrying the same approvals concurrently, each with  *)
(*    at most one request in flight, replaying freely;                     *)
(*  - the human's answer per client and approval: the same question shown  *)
(*    in two clients may be accepted in one and declined in the other;     *)
(*  - several Replicas, deployed either with one shared durable store      *)
(*    ("shared": Redis/PostgreSQL) or each with its own in-memory store    *)
(*    ("memory", the default) -- both deployments are explored in one run; *)
(*  - expiry as time passes, and the store forgetting records (tombstones  *)
(*    included) once expiry + Grace has passed;                            *)
(*  - a replica crashing at any point, in particular between Redeem and    *)
(*    the effect, and restarting at once with an empty memory store.       *)
(*                                                                         *)
(* The guarantee is AT MOST ONCE, NOT EXACTLY ONCE: a crash between Redeem *)
(* and DoEffect loses the effect for good (lost[a] records it); the        *)
(* approval is spent and the user has to ask again.  That is the price of  *)
(* never acting twice.                                                     *)
(*                                                                         *)
(* Abstracted away:                                                        *)
(*  - Cryptography.  The sealed requestState is unforgeable: a client can  *)
(*    only present states that were issued, and the binding to method,     *)
(*    arguments, audience and principal is collapsed into "one approval id *)
(*    per tool call".  Ids are fresh model values (at least 120 random     *)
(*    bits, which never collide), so an id is issued at most once.         *)
(*  - The client relays the human's answer faithfully.  A client lying     *)
(*    about the answer is indistinguishable from the human, here and in    *)
(*    MRTR.                                                                *)
(*  - Clocks.  One clock, now.  Each approval lives in exactly one store,  *)
(*    and the properties are stated against that store's clock, the one    *)
(*    its atomic operation checks.  Skew between replicas changes only     *)
(*    when the envelope check refuses (which removes behaviours, never     *)
(*    adds any) and, in the shared deployment, how long an approval lives  *)
(*    in real time, since the issuing replica computes the expiry: TTL     *)
(*    plus or minus the skew.                                              *)
(*  - Failed Redeem/Cancel attempts (ErrUnknown, ErrSpent, ErrExpired,     *)
(*    ErrCancelled) change no state: they are stuttering steps and are not *)
(*    written as actions.  TraceLedger.tla checks that the Go ledger       *)
(*    returns the error the store's state implies.                         *)
(*  - Networks.  A request reaches its replica in the step that processes  *)
(*    it; a lost reply is the client retrying.  The shared store never     *)
(*    loses data, and a replica restarts in the same step it crashes.      *)
(*  - The deletion itself, and the re-check of the file at execution: an   *)
(*    Effect is one appended record in effects[a].                         *)
(*                                                                         *)
(* CheckThenAct = TRUE gives the negative control (LedgerRace.cfg): redeem *)
(* reads the status and writes "redeemed" in two separate steps, as a      *)
(* store without an atomic compare-and-set would.  TLC must then find a    *)
(* behaviour in which one approval takes effect twice.                     *)
(*                                                                         *)
(* MCLedger.tla holds the TLC-only definitions; TraceLedger.tla checks     *)
(* logs of the Go ledger (impl/ledger) against this module.                *)
(***************************************************************************)
EXTENDS Naturals, Sequences

CONSTANTS
    Replicas,     \* server replicas behind one load balancer (model values)
    Clients,      \* MCP clients retrying calls (model values)
    Approvals,    \* approval ids; each one is a fresh random id (model values)
    Shared,       \* the name of the one shared store (a model value)
    None,         \* the empty slot of an idle request (a model value)
    Deployments,  \* nonempty subset of {"shared", "memory"}: the deployments to explore
    TTL,          \* lifetime of an approval and of its sealed state, in ticks
    Grace,        \* how long the store remembers a record after its expiry
    CheckThenAct  \* FALSE: redeem is an atomic compare-and-set; TRUE: the broken control

ASSUME /\ Deployments # {} /\ Deployments \subseteq {"shared", "memory"}
       /\ TTL \in Nat \ {0} /\ Grace \in Nat
       /\ CheckThenAct \in BOOLEAN
       /\ Shared \notin Replicas /\ None \notin Replicas \cup Approvals

VARIABLES
    now,         \* the clock (see "Clocks" above)
    deployment,  \* "shared" or "memory"; chosen initially, never changes
    envelope,    \* envelope[a]: was a issued, and the expiry sealed into its requestState
    store,       \* store[s][a]: the record store s holds for approval a
    answer,      \* answer[c][a]: what the human answered to a in client c
    req,         \* req[c]: the request client c has in flight after a successful check
    effects,     \* history: effects[a], one record per time a's deletion happened
    cancelled,   \* history: cancelled[a], some Cancel of a succeeded
    spent,       \* history: spent[a], some Redeem of a succeeded
    lost         \* history: lost[a], a crash dropped a's effect after its Redeem

vars == <<now, deployment, envelope, store, answer, req, effects, cancelled, spent, lost>>

-----------------------------------------------------------------------------
(* Types and helpers. *)

Stores == Replicas \cup {Shared}

\* The store replica r reads and writes in the current deployment.
StoreOf(r) == IF deployment = "shared" THEN Shared ELSE r

Status == {"absent", "pending", "redeemed", "cancelled"}
Absent == [status |-> "absent", exp |-> 0]
Record == [status : Status, exp : Nat]

Envelope == [issued : BOOLEAN, exp : Nat]
NotIssued == [issued |-> FALSE, exp |-> 0]

Answers == {"none", "accept", "decline"}

\* "checked" only occurs with CheckThenAct: the status was read, not yet written.
Phases == {"idle", "checked", "redeemed"}
Request == [phase : Phases, appr : Approvals \cup {None}, rep : Replicas \cup {None}, at : Nat]
Idle == [phase |-> "idle", appr |-> None, rep |-> None, at |-> 0]

\* One performed deletion: on whose retry, and when its Redeem succeeded.
Effect == [client : Clients, at : Nat]

TypeOK ==
    /\ now \in Nat
    /\ deployment \in Deployments
    /\ envelope \in [Approvals -> Envelope]
    /\ store \in [Stores -> [Approvals -> Record]]
    /\ answer \in [Clients -> [Approvals -> Answers]]
    /\ req \in [Clients -> Request]
    /\ effects \in [Approvals -> Seq(Effect)]
    /\ cancelled \in [Approvals -> BOOLEAN]
    /\ spent \in [Approvals -> BOOLEAN]
    /\ lost \in [Approvals -> BOOLEAN]

-----------------------------------------------------------------------------
Init ==
    /\ now = 0
    /\ deployment \in Deployments
    /\ envelope = [a \in Approvals |-> NotIssued]
    /\ store = [s \in Stores |-> [a \in Approvals |-> Absent]]
    /\ answer = [c \in Clients |-> [a \in Approvals |-> "none"]]
    /\ req = [c \in Clients |-> Idle]
    /\ effects = [a \in Approvals |-> <<>>]
    /\ cancelled = [a \in Approvals |-> FALSE]
    /\ spent = [a \in Approvals |-> FALSE]
    /\ lost = [a \in Approvals |-> FALSE]

(***************************************************************************)
(* Replica r handles a destructive tools/call and asks for confirmation:   *)
(* Ledger.Issue stores a fresh id as pending in r's store with expiry      *)
(* now + TTL, and the same expiry is sealed into the requestState that     *)
(* every client may now hold (and replay).                                 *)
(***************************************************************************)
Issue(r, a) ==
    /\ ~envelope[a].issued
    /\ envelope' = [envelope EXCEPT ![a] = [issued |-> TRUE, exp |-> now + TTL]]
    /\ store' = [store EXCEPT ![StoreOf(r)][a] = [status |-> "pending", exp |-> now + TTL]]
    /\ UNCHANGED <<now, deployment, answer, req, effects, cancelled, spent, lost>>

(***************************************************************************)
(* The human, shown the question for a in client c, accepts it.  An answer *)
(* is given once per client and never changes.                             *)
(***************************************************************************)
Confirm(c, a) ==
    /\ envelope[a].issued
    /\ answer[c][a] = "none"
    /\ answer' = [answer EXCEPT ![c][a] = "accept"]
    /\ UNCHANGED <<now, deployment, envelope, store, req, effects, cancelled, spent, lost>>

(* The human, shown the question for a in client c, declines it. *)
Decline(c, a) ==
    /\ envelope[a].issued
    /\ answer[c][a] = "none"
    /\ answer' = [answer EXCEPT ![c][a] = "decline"]
    /\ UNCHANGED <<now, deployment, envelope, store, req, effects, cancelled, spent, lost>>

(***************************************************************************)
(* The boundary lets client c's retry of a, carrying answer ans, through   *)
(* to replica r: c has no request in flight, the sealed state verifies and *)
(* is unexpired on r's clock, and the human answered ans in c.             *)
(***************************************************************************)
Admitted(c, a, ans) ==
    /\ req[c].phase = "idle"
    /\ envelope[a].issued
    /\ now < envelope[a].exp
    /\ answer[c][a] = ans

\* The store check inside Ledger.Redeem/Cancel: pending and unexpired on the store's clock.
Redeemable(s, a) == store[s][a].status = "pending" /\ now < store[s][a].exp

(***************************************************************************)
(* Replica r receives c's retry of a with "accept" and calls               *)
(* Ledger.Redeem: one atomic compare-and-set pending -> redeemed in r's    *)
(* store.  On success r now owes the effect; on any error nothing changes. *)
(***************************************************************************)
Redeem(c, r, a) ==
    /\ ~CheckThenAct
    /\ Admitted(c, a, "accept")
    /\ Redeemable(StoreOf(r), a)
    /\ store' = [store EXCEPT ![StoreOf(r)][a].status = "redeemed"]
    /\ req' = [req EXCEPT ![c] = [phase |-> "redeemed", appr |-> a, rep |-> r, at |-> now]]
    /\ spent' = [spent EXCEPT ![a] = TRUE]
    /\ UNCHANGED <<now, deployment, envelope, answer, effects, cancelled, lost>>

(***************************************************************************)
(* Negative control, first half: a store without compare-and-set.  Replica *)
(* r reads a's record and finds it pending and unexpired ...               *)
(***************************************************************************)
RedeemCheck(c, r, a) ==
    /\ CheckThenAct
    /\ Admitted(c, a, "accept")
    /\ Redeemable(StoreOf(r), a)
    /\ req' = [req EXCEPT ![c] = [phase |-> "checked", appr |-> a, rep |-> r, at |-> now]]
    /\ UNCHANGED <<now, deployment, envelope, store, answer, effects, cancelled, spent, lost>>

(***************************************************************************)
(* ... and, in a later step, writes "redeemed" without looking again.      *)
(* Anything may have happened to the record in between.                    *)
(***************************************************************************)
RedeemAct(c) ==
    /\ req[c].phase = "checked"
    /\ store' = [store EXCEPT ![StoreOf(req[c].rep)][req[c].appr].status = "redeemed"]
    /\ req' = [req EXCEPT ![c].phase = "redeemed"]
    /\ spent' = [spent EXCEPT ![req[c].appr] = TRUE]
    /\ UNCHANGED <<now, deployment, envelope, answer, effects, cancelled, lost>>

(***************************************************************************)
(* The replica that redeemed a for client c performs the deletion and      *)
(* replies.  It does not look at the clock again: the decision was made by *)
(* the Redeem, and effects[a] records when that was.                       *)
(***************************************************************************)
DoEffect(c) ==
    /\ req[c].phase = "redeemed"
    /\ effects' = [effects EXCEPT ![req[c].appr] = Append(@, [client |-> c, at |-> req[c].at])]
    /\ req' = [req EXCEPT ![c] = Idle]
    /\ UNCHANGED <<now, deployment, envelope, store, answer, cancelled, spent, lost>>

(***************************************************************************)
(* Replica r receives c's retry of a with "decline" and calls              *)
(* Ledger.Cancel: one atomic compare-and-set pending -> cancelled.  The    *)
(* reply is immediate; nothing is deleted.                                 *)
(***************************************************************************)
Cancel(c, r, a) ==
    /\ Admitted(c, a, "decline")
    /\ Redeemable(StoreOf(r), a)
    /\ store' = [store EXCEPT ![StoreOf(r)][a].status = "cancelled"]
    /\ cancelled' = [cancelled EXCEPT ![a] = TRUE]
    /\ UNCHANGED <<now, deployment, envelope, answer, req, effects, spent, lost>>

(***************************************************************************)
(* Store s forgets a once expiry + Grace has passed: pending records and   *)
(* the redeemed/cancelled tombstones alike.  A replay after this gets      *)
(* ErrUnknown from the store -- but its sealed state, with the same        *)
(* expiry, is refused by the boundary first.                               *)
(***************************************************************************)
Forget(s, a) ==
    /\ store[s][a].status # "absent"
    /\ now >= store[s][a].exp + Grace
    /\ store' = [store EXCEPT ![s][a] = Absent]
    /\ UNCHANGED <<now, deployment, envelope, answer, req, effects, cancelled, spent, lost>>

(***************************************************************************)
(* Replica r crashes and restarts.  Every request it was handling is       *)
(* dropped (its clients see a broken connection and may retry); an effect  *)
(* it owed after a successful Redeem is lost for good.  In the "memory"    *)
(* deployment its store comes back empty; a shared store is untouched.     *)
(***************************************************************************)
Restart(r) ==
    /\ store' = IF deployment = "memory"
                   THEN [store EXCEPT ![r] = [a \in Approvals |-> Absent]]
                   ELSE store
    /\ req' = [c \in Clients |-> IF req[c].rep = r THEN Idle ELSE req[c]]
    /\ lost' = [a \in Approvals |->
                  lost[a] \/ \E c \in Clients : /\ req[c].rep = r
                                                /\ req[c].phase = "redeemed"
                                                /\ req[c].appr = a]
    /\ UNCHANGED <<now, deployment, envelope, answer, effects, cancelled, spent>>

(* Time passes. *)
Tick ==
    /\ now' = now + 1
    /\ UNCHANGED <<deployment, envelope, store, answer, req, effects, cancelled, spent, lost>>

Next ==
    \/ \E r \in Replicas, a \in Approvals : Issue(r, a)
    \/ \E c \in Clients, a \in Approvals : Confirm(c, a) \/ Decline(c, a)
    \/ \E c \in Clients, r \in Replicas, a \in Approvals :
          Redeem(c, r, a) \/ RedeemCheck(c, r, a) \/ Cancel(c, r, a)
    \/ \E c \in Clients : RedeemAct(c) \/ DoEffect(c)
    \/ \E s \in Stores, a \in Approvals : Forget(s, a)
    \/ \E r \in Replicas : Restart(r)
    \/ Tick

\* A replica that holds a redeemed request and stays up eventually acts on it.
Fairness == \A c \in Clients : WF_vars(DoEffect(c))

Spec == Init /\ [][Next]_vars /\ Fairness

-----------------------------------------------------------------------------
(* Safety. *)

\* No approval's effect happens twice.
AtMostOnce == \A a \in Approvals : Len(effects[a]) <= 1

\* Every effect of a was done on the retry of a client in which the human accepted a itself.
NoEffectWithoutConfirmation ==
    \A a \in Approvals : \A i \in 1..Len(effects[a]) :
        answer[effects[a][i].client][a] = "accept"

\* Every effect was authorized by a Redeem strictly before the approval's expiry.
\* (The deletion itself may run later if the replica is slow: it is not re-timed.)
NoEffectAfterExpiry ==
    \A a \in Approvals : \A i \in 1..Len(effects[a]) :
        effects[a][i].at < envelope[a].exp

\* Once a decline was recorded, a never takes effect (and, conversely, an approval
\* that took effect can no longer be cancelled).
NoEffectAfterDecline == \A a \in Approvals : cancelled[a] => effects[a] = <<>>

\* A spent approval stays spent: no store ever holds it as pending (or cancelled)
\* again, so no later Redeem can succeed.  Forgetting it is fine: ErrUnknown refuses.
SpentStaysSpent ==
    \A a \in Approvals : spent[a] =>
        \A s \in Stores : store[s][a].status \in {"redeemed", "absent"}

\* The same, step by step: a redeemed record only ever stays redeemed or is forgotten.
SpentIsFinal ==
    [][\A s \in Stores, a \in Approvals :
         store[s][a].status = "redeemed" => store'[s][a].status \in {"redeemed", "absent"}]_vars

Safe ==
    /\ TypeOK
    /\ AtMostOnce
    /\ NoEffectWithoutConfirmation
    /\ NoEffectAfterExpiry
    /\ NoEffectAfterDecline
    /\ SpentStaysSpent

(* Liveness. *)

\* A successful Redeem is eventually followed by its effect, unless the replica
\* that redeemed crashed first: at most once, and exactly once barring crashes.
RedeemLeadsToEffect ==
    \A a \in Approvals : spent[a] ~> (effects[a] # <<>> \/ lost[a])

THEOREM Spec => []Safe
THEOREM Spec => SpentIsFinal /\ RedeemLeadsToEffect
=============================================================================
