------------------------------- MODULE Ledger -------------------------------
(***************************************************************************)
(* Exactly-once answers for confirmations of MCP multi round-trip          *)
(* requests: one approval, at most one effect, one answer repeated to      *)
(* every retry.                                                            *)
(*                                                                         *)
(* A destructive tool call (the demo deletes a file) first returns         *)
(* input_required: the replica that handled it Issues an approval -- a     *)
(* pending record in its ledger store with a random id and an absolute     *)
(* expiry -- and hands the client a sealed requestState carrying that id   *)
(* and the same expiry.  The human answers; the client retries the call    *)
(* with the answer and the echoed state, to whichever replica the load     *)
(* balancer picks, as often as it likes.                                   *)
(*                                                                         *)
(* On "accept" the replica Redeems the id: one atomic compare-and-set      *)
(* pending -> acting inside the store, which also checks expiry on the     *)
(* store's clock and grants the replica a lease (LeaseUntil = now +        *)
(* Lease).  Only then does that replica act (DoEffect: the deletion, which *)
(* reports done, failed, or -- the proxy's lost upstream reply -- unknown) *)
(* and Complete the record: a second compare-and-set acting -> done or     *)
(* failed carrying the result, or acting -> in doubt for an unknown        *)
(* outcome, accepted only while the lease lasts.  A record still acting    *)
(* when its lease ends is in doubt, for good: a late Complete fails and    *)
(* changes nothing.  A retry of an approval that is no longer pending is   *)
(* answered from the record (Replay): "in progress" while acting, the      *)
(* recorded result of the one execution once done or failed, "the action   *)
(* may or may not have happened" once in doubt -- and nothing runs.  On    *)
(* "decline" the replica Cancels: pending -> cancelled, also atomically.   *)
(*                                                                         *)
(* Out-of-band approval.  A confirmation may need, besides the client's    *)
(* answer, the approval of N distinct approvers reached outside the chat   *)
(* (a page; N is chosen per confirmation from Quorums, 0 meaning in band   *)
(* only, as above).  An approver is a person who signed in separately from *)
(* the caller -- authentication is abstracted: an action of approver p is  *)
(* p's, and no client can take one.  Only the Authorized approvers may    *)
(* decide, and never the confirmation's requester when it has one in the   *)
(* approvers' naming (four-eyes).  Each Decide is one atomic step in the   *)
(* store, on the store's clock: it records p's approve or decline once,    *)
(* only while the record is pending, unexpired and undecided -- no         *)
(* decision of p's yet, fewer than N approvals, no decline.  A decline     *)
(* decides at once: pending -> cancelled.  Redeem also requires the N      *)
(* approvals; before them a retry is told it is awaiting approval and      *)
(* nothing changes.  The client's own decline (Cancel) still withdraws the *)
(* request at any time while it is pending.                                *)
(*                                                                         *)
(* Modelled:                                                               *)
(*  - several Clients retrying the same approvals concurrently, each with  *)
(*    at most one request in flight, replaying freely;                     *)
(*  - the human's answer per client and approval: the same question shown  *)
(*    in two clients may be accepted in one and declined in the other;     *)
(*  - several Replicas, deployed either with one shared durable store      *)
(*    ("shared": Redis/PostgreSQL) or each with its own in-memory store    *)
(*    ("memory", the default) -- both deployments are explored in one run; *)
(*  - expiry and the lease as time passes, and the store forgetting        *)
(*    records once max(expiry, lease) + Grace has passed;                  *)
(*  - a replica crashing at any point -- between Redeem and the effect,    *)
(*    between the effect and Complete -- and restarting at once with an    *)
(*    empty memory store; a replica slower than its lease; an execution    *)
(*    whose outcome is unknown;                                            *)
(*  - approvers, authorized or not, the requester among them, deciding     *)
(*    through any replica, concurrently, as often as they like.            *)
(*                                                                         *)
(* The guarantee: an approval's action runs AT MOST ONCE, and every retry  *)
(* of it is answered with THE ONE RECORDED OUTCOME (or "in progress"       *)
(* before there is one).  It is not exactly once: when the replica that    *)
(* redeemed crashes, overruns its lease, or cannot tell what happened, the *)
(* approval ends IN DOUBT -- the effect may or may not have happened, the  *)
(* person is told so, and nothing ever runs again.  Without those faults   *)
(* every redeemed approval ends done or failed (RedeemEndsDoneOrFailed).   *)
(* And with out-of-band approval: no redemption without N recorded         *)
(* approvals by distinct authorized approvers, none of them the requester  *)
(* (NoRedeemWithoutApproval); every decision recorded is by an authorized  *)
(* approver (OnlyAuthorizedDecide) who is not the requester                *)
(* (NoSelfDecision), at most once per approver and never after the        *)
(* outcome was decided (DecidedOnce).                                      *)
(*                                                                         *)
(* Abstracted away:                                                        *)
(*  - Cryptography.  The sealed requestState is unforgeable: a client can  *)
(*    only present states that were issued, and the binding to method,     *)
(*    arguments, audience and principal is collapsed into "one approval id *)
(*    per tool call" (a retry with another binding is refused before the   *)
(*    ledger answers).  Ids are fresh model values (at least 120 random    *)
(*    bits, which never collide), so an id is issued at most once.         *)
(*  - The client relays the human's answer faithfully.  A client lying     *)
(*    about the answer is indistinguishable from the human, here and in    *)
(*    MRTR: out-of-band approval is what a lying client cannot forge.      *)
(*  - Approvers' sign-in, the approval page and its link: the id is        *)
(*    unguessable, and an approver reaches the record through whichever    *)
(*    replica serves the page.  Eligibility by group is one set here.      *)
(*  - Clocks.  One clock, now.  Each approval lives in exactly one store,  *)
(*    and the properties are stated against that store's clock, the one    *)
(*    its atomic operations check (expiry, lease).  Skew between replicas  *)
(*    changes only when the envelope check refuses (which removes          *)
(*    behaviours, never adds any) and, in the shared deployment, how long  *)
(*    an approval lives in real time, since the issuing replica computes   *)
(*    the expiry: TTL plus or minus the skew.                              *)
(*  - Lazy doubt.  The Go stores decide "in doubt" when they read a record *)
(*    acting at or after its lease; here the tick that reaches the lease   *)
(*    turns it to "doubt" (PassTime), which no step can tell apart.        *)
(*  - Refused operations (unknown, expired, cancelled, in progress; a      *)
(*    Complete after the lease) change no state: they are stuttering steps *)
(*    and are not written as actions, except a Replay, which records the   *)
(*    final answer it gave in the history variable replies.                *)
(*    TraceLedger.tla checks that the Go ledger answers what the store's   *)
(*    state implies.                                                       *)
(*  - Networks.  A request reaches its replica in the step that processes  *)
(*    it; a lost reply is the client retrying.  The shared store never     *)
(*    loses data, and a replica restarts in the same step it crashes.      *)
(*  - The deletion itself, its re-check at execution, and the result's     *)
(*    content: an execution is one appended record in effects[a], and the  *)
(*    result it returns is named by its position there (exec).             *)
(*                                                                         *)
(* Flaw # "none" gives the negative controls, each a broken design TLC     *)
(* must refute:                                                            *)
(*  - "check-then-act" (LedgerRace.cfg): redeem reads the status and       *)
(*    writes "acting" in two separate steps, as a store without an atomic  *)
(*    compare-and-set would: one approval takes effect twice;              *)
(*  - "replay-reruns" (LedgerRerun.cfg): a retry of a done approval is     *)
(*    answered by running the action again instead of from the record;     *)
(*  - "blind-complete" (LedgerBlind.cfg): Complete writes the outcome      *)
(*    without the compare-and-set, so a replica that overran its lease     *)
(*    overwrites "in doubt", and a retry is told something else than the   *)
(*    recorded outcome;                                                    *)
(*  - "self-approval" (LedgerSelfApproval.cfg): Decide does not exclude    *)
(*    the requester, who decides (approves, declines) their own request;   *)
(*  - "decide-twice" (LedgerDecideTwice.cfg): Decide does not look for a   *)
(*    decision already recorded, so an approver decides twice, or one      *)
(*    decides after the outcome was;                                       *)
(*  - "redeem-unapproved" (LedgerRedeemUnapproved.cfg): Redeem does not    *)
(*    look at the approvals, and acts before they are recorded;            *)
(*  - "unlisted-approver" (LedgerUnlisted.cfg): Decide takes a decision    *)
(*    from any signed-in approver, authorized or not.                      *)
(*                                                                         *)
(* MCLedger.tla holds the TLC-only definitions; TraceLedger.tla checks     *)
(* logs of the Go ledger (impl/ledger) against this module.                *)
(***************************************************************************)
EXTENDS Naturals, Sequences, FiniteSets

CONSTANTS
    Replicas,     \* server replicas behind one load balancer (model values)
    Clients,      \* MCP clients retrying calls (model values)
    Approvals,    \* approval ids; each one is a fresh random id (model values)
    Shared,       \* the name of the one shared store (a model value)
    None,         \* the empty slot of an idle request (a model value)
    Deployments,  \* nonempty subset of {"shared", "memory"}: the deployments to explore
    TTL,          \* lifetime of an approval and of its sealed state, in ticks
    Lease,        \* how long the replica that redeemed has to act and Complete, in ticks
    Grace,        \* how long the store remembers a record after max(expiry, lease)
    Approvers,    \* people who may sign in to the approval page (model values)
    Authorized,   \* the approvers allowed to decide (a subset of Approvers)
    Quorums,      \* the numbers of distinct approvals a confirmation may need; 0: in band only
    Flaw          \* "none": the ledger as built; otherwise the broken design of a control

Flaws == {"none", "check-then-act", "replay-reruns", "blind-complete",
          "self-approval", "decide-twice", "redeem-unapproved", "unlisted-approver"}

ASSUME /\ Deployments # {} /\ Deployments \subseteq {"shared", "memory"}
       /\ TTL \in Nat \ {0} /\ Lease \in Nat \ {0} /\ Grace \in Nat
       /\ Flaw \in Flaws
       /\ Shared \notin Replicas /\ None \notin Replicas \cup Approvals \cup Approvers
       /\ Authorized \subseteq Approvers
       /\ Quorums # {} /\ Quorums \subseteq Nat

VARIABLES
    now,         \* the clock (see "Clocks" above)
    deployment,  \* "shared" or "memory"; chosen initially, never changes
    envelope,    \* envelope[a]: was a issued, and the expiry sealed into its requestState
    store,       \* store[s][a]: the record store s holds for approval a
    answer,      \* answer[c][a]: what the human answered to a in client c
    req,         \* req[c]: the request client c has in flight after a successful check
    effects,     \* history: effects[a], one record per execution of a's action
    cancelled,   \* history: cancelled[a], some Cancel of a succeeded
    spent,       \* history: spent[a], some Redeem of a succeeded
    recorded,    \* history: recorded[a], the first outcome any store recorded for a
    replies,     \* history: replies[a], the final answers retries of a were given
    faults,      \* history: faults[a], why a's outcome may be unknown (see Faults)
    decisions    \* history: decisions[a], every decision any store recorded for a, in order

vars == <<now, deployment, envelope, store, answer, req, effects, cancelled, spent,
          recorded, replies, faults, decisions>>

-----------------------------------------------------------------------------
(* Types and helpers. *)

Stores == Replicas \cup {Shared}

\* The store replica r reads and writes in the current deployment.
StoreOf(r) == IF deployment = "shared" THEN Shared ELSE r

Max(x, y) == IF x >= y THEN x ELSE y

\* "acting": redeemed, the replica holds the lease; done, failed, doubt: the outcome.
Status == {"absent", "pending", "acting", "done", "failed", "doubt", "cancelled"}
Redeemed == {"acting", "done", "failed", "doubt"}
Final == {"done", "failed", "doubt"}
\* A decision slot of a record: approver p has not decided, approved, declined.
Verdicts == {"none", "approve", "decline"}
NoVerdicts == [p \in Approvers |-> "none"]

\* lease: LeaseUntil, set by Redeem; exec: the execution whose result a done or
\* failed record holds (0 otherwise); need: the approvals it needs (0: in
\* band); requester: who asked, in the approvers' naming (None: no one of
\* them), never to decide; dec: each approver's recorded decision.
Record == [status : Status, exp : Nat, lease : Nat, exec : Nat,
           need : Quorums \cup {0}, requester : Approvers \cup {None}, dec : [Approvers -> Verdicts]]
Absent == [status |-> "absent", exp |-> 0, lease |-> 0, exec |-> 0,
           need |-> 0, requester |-> None, dec |-> NoVerdicts]

\* The approvers who approved (declined) in record rec.
ApproversOf(rec) == {p \in Approvers : rec.dec[p] = "approve"}
DeclinersOf(rec) == {p \in Approvers : rec.dec[p] = "decline"}

\* rec has the approvals it needs (none, for one approved in band).
Approved(rec) == Cardinality(ApproversOf(rec)) >= rec.need

\* The outcome of rec's approval is decided: approved, or declined.
Decided(rec) == rec.need > 0 /\ (Approved(rec) \/ DeclinersOf(rec) # {})

\* An outcome: what a final record says, and so what a retry is told.  kind
\* "none" is the outcome of an approval before any was recorded.
Outcome == [kind : Final \cup {"none"}, exec : Nat]
NoOutcome == [kind |-> "none", exec |-> 0]
OutcomeOf(rec) == [kind |-> rec.status, exec |-> rec.exec]
InDoubt == [kind |-> "doubt", exec |-> 0]

\* What Issue fixed: the expiry sealed into the requestState, and the
\* approval policy given to the store with the record (need, requester).
Envelope == [issued : BOOLEAN, exp : Nat, need : Quorums \cup {0}, requester : Approvers \cup {None}]
NotIssued == [issued |-> FALSE, exp |-> 0, need |-> 0, requester |-> None]

\* One decision recorded: who, and whether they approved.
Decision == [who : Approvers, yes : BOOLEAN]

Answers == {"none", "accept", "decline"}

\* What one execution of the action reports: it happened, it failed (refused
\* or errored), or the replica cannot tell (the proxy lost the upstream's reply).
Kinds == {"done", "failed", "unknown"}

\* "checked" only occurs with the check-then-act flaw: the status was read,
\* not yet written.  "acting": redeemed, the effect is owed; "acted": the
\* effect ran and reported kind, its outcome is owed (Complete).
Phases == {"idle", "checked", "acting", "acted"}
Request == [phase : Phases, appr : Approvals \cup {None}, rep : Replicas \cup {None},
            at : Nat, kind : Kinds \cup {"none"}, exec : Nat]
Idle == [phase |-> "idle", appr |-> None, rep |-> None, at |-> 0, kind |-> "none", exec |-> 0]

\* One execution of the action: on whose retry, when its Redeem succeeded, what it reported.
Effect == [client : Clients, at : Nat, kind : Kinds]

\* Why an approval's outcome may be unknown: the replica that redeemed it
\* crashed before Complete, it was still working when the lease ended, or
\* the execution reported an unknown outcome.
Faults == {"crash", "lease", "unknown"}

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
    /\ recorded \in [Approvals -> Outcome]
    /\ replies \in [Approvals -> SUBSET Outcome]
    /\ faults \in [Approvals -> SUBSET Faults]
    /\ decisions \in [Approvals -> Seq(Decision)]

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
    /\ recorded = [a \in Approvals |-> NoOutcome]
    /\ replies = [a \in Approvals |-> {}]
    /\ faults = [a \in Approvals |-> {}]
    /\ decisions = [a \in Approvals |-> <<>>]

(***************************************************************************)
(* Replica r handles a destructive tools/call and asks for confirmation:   *)
(* Ledger.Issue stores a fresh id as pending in r's store with expiry      *)
(* now + TTL, and the same expiry is sealed into the requestState that     *)
(* every client may now hold (and replay).  The confirmation needs n       *)
(* out-of-band approvals (0: none), and its requester is q in the          *)
(* approvers' naming -- possibly an approver, the case four-eyes is for -- *)
(* or None.                                                                *)
(***************************************************************************)
Requesters(n) == IF n = 0 THEN {None} ELSE Approvers \cup {None}

Issue(r, a, n, q) ==
    /\ ~envelope[a].issued
    /\ n \in Quorums /\ q \in Requesters(n)
    /\ envelope' = [envelope EXCEPT ![a] = [issued |-> TRUE, exp |-> now + TTL, need |-> n, requester |-> q]]
    /\ store' = [store EXCEPT ![StoreOf(r)][a] =
                    [Absent EXCEPT !.status = "pending", !.exp = now + TTL, !.need = n, !.requester = q]]
    /\ UNCHANGED <<now, deployment, answer, req, effects, cancelled, spent, recorded, replies, faults, decisions>>

(***************************************************************************)
(* The boundary lets client c's retry of a, carrying answer ans, through   *)
(* to a replica: c has no request in flight, the sealed state verifies and *)
(* is unexpired on that replica's clock, and ans is the human's answer to  *)
(* a in c.  The human is shown the question once per client and answers   *)
(* it once; the answer travels with every retry of c and is recorded in    *)
(* answer[c][a] by the first retry that changes the ledger (Answered).  A  *)
(* retry the ledger refuses records nothing, so a client whose refused     *)
(* retry carried one answer may later carry the other: more behaviours,    *)
(* never fewer.  The question shown in two clients may be accepted in one  *)
(* and declined in the other.                                              *)
(***************************************************************************)
Admitted(c, a, ans) ==
    /\ req[c].phase = "idle"
    /\ envelope[a].issued
    /\ now < envelope[a].exp
    /\ answer[c][a] \in {"none", ans}

Answered(c, a, ans) == answer' = [answer EXCEPT ![c][a] = ans]

\* The store check inside Ledger.Redeem/Cancel: pending and unexpired on the store's clock.
Redeemable(s, a) == store[s][a].status = "pending" /\ now < store[s][a].exp

\* The further check inside Ledger.Redeem: the approvals a needs are recorded
\* (none needed in band).  The "redeem-unapproved" flaw skips it.
ApprovedIn(s, a) == Approved(store[s][a]) \/ Flaw = "redeem-unapproved"

\* a's record in store s once redeemed at the current time: acting, lease granted.
Acting(s, a) == [store[s][a] EXCEPT !.status = "acting", !.lease = now + Lease]

(***************************************************************************)
(* Replica r receives c's retry of a with "accept" and calls               *)
(* Ledger.Redeem: one atomic compare-and-set pending -> acting in r's      *)
(* store, with LeaseUntil = now + Lease, only once the approvals it needs  *)
(* are recorded.  On success r now owes the effect and the outcome; on any *)
(* error (awaiting approval among them) nothing changes.                   *)
(***************************************************************************)
Redeem(c, r, a) ==
    /\ Flaw # "check-then-act"
    /\ Admitted(c, a, "accept")
    /\ Redeemable(StoreOf(r), a)
    /\ ApprovedIn(StoreOf(r), a)
    /\ store' = [store EXCEPT ![StoreOf(r)][a] = Acting(StoreOf(r), a)]
    /\ req' = [req EXCEPT ![c] = [Idle EXCEPT !.phase = "acting", !.appr = a, !.rep = r, !.at = now]]
    /\ spent' = [spent EXCEPT ![a] = TRUE]
    /\ Answered(c, a, "accept")
    /\ UNCHANGED <<now, deployment, envelope, effects, cancelled, recorded, replies, faults, decisions>>

(***************************************************************************)
(* Negative control "check-then-act", first half: a store without          *)
(* compare-and-set.  Replica r reads a's record and finds it pending and   *)
(* unexpired ...                                                           *)
(***************************************************************************)
RedeemCheck(c, r, a) ==
    /\ Flaw = "check-then-act"
    /\ Admitted(c, a, "accept")
    /\ Redeemable(StoreOf(r), a)
    /\ ApprovedIn(StoreOf(r), a)
    /\ req' = [req EXCEPT ![c] = [Idle EXCEPT !.phase = "checked", !.appr = a, !.rep = r, !.at = now]]
    /\ Answered(c, a, "accept")
    /\ UNCHANGED <<now, deployment, envelope, store, effects, cancelled, spent, recorded, replies, faults, decisions>>

(***************************************************************************)
(* ... and, in a later step, writes "acting" without looking again.        *)
(* Anything may have happened to the record in between.                    *)
(***************************************************************************)
RedeemAct(c) ==
    LET s == StoreOf(req[c].rep)
        a == req[c].appr
    IN /\ req[c].phase = "checked"
       /\ store' = [store EXCEPT ![s][a] = Acting(s, a)]
       /\ req' = [req EXCEPT ![c].phase = "acting"]
       /\ spent' = [spent EXCEPT ![a] = TRUE]
       /\ UNCHANGED <<now, deployment, envelope, answer, effects, cancelled, recorded, replies, faults, decisions>>

(***************************************************************************)
(* The replica that redeemed a for client c runs the action (the deletion) *)
(* once, and learns what it reported: done, failed, or unknown.  It does   *)
(* not look at the clock or the lease: the decision was made by the        *)
(* Redeem, and effects[a] records when that was.  A replica slower than    *)
(* its lease still acts; only its Complete comes too late.                 *)
(***************************************************************************)
DoEffect(c) ==
    LET a == req[c].appr IN
    /\ req[c].phase = "acting"
    /\ \E k \in Kinds :
          /\ effects' = [effects EXCEPT ![a] = Append(@, [client |-> c, at |-> req[c].at, kind |-> k])]
          /\ req' = [req EXCEPT ![c].phase = "acted", ![c].kind = k, ![c].exec = Len(effects[a]) + 1]
          /\ faults' = IF k = "unknown" THEN [faults EXCEPT ![a] = @ \cup {"unknown"}] ELSE faults
    /\ UNCHANGED <<now, deployment, envelope, store, answer, cancelled, spent, recorded, replies, decisions>>

(***************************************************************************)
(* The replica records what its execution reported and replies to c:      *)
(* Ledger.Complete, a compare-and-set acting -> done or failed (with the   *)
(* execution's result), or acting -> in doubt for an unknown outcome,      *)
(* accepted only while the lease lasts.  Otherwise (the lease ended and    *)
(* the record is in doubt) it fails and changes nothing; the person still  *)
(* gets this call's own result.  Either way the request ends.  With the    *)
(* "blind-complete" flaw the outcome is written whatever the record holds. *)
(***************************************************************************)
Complete(c) ==
    LET a   == req[c].appr
        s   == StoreOf(req[c].rep)
        out == IF req[c].kind = "unknown" THEN InDoubt
               ELSE [kind |-> req[c].kind, exec |-> req[c].exec]
    IN /\ req[c].phase = "acted"
       /\ req' = [req EXCEPT ![c] = Idle]
       /\ IF \/ store[s][a].status = "acting" /\ now < store[s][a].lease
             \/ Flaw = "blind-complete"
          THEN /\ store' = [store EXCEPT ![s][a].status = out.kind, ![s][a].exec = out.exec]
               /\ recorded' = IF recorded[a] = NoOutcome THEN [recorded EXCEPT ![a] = out] ELSE recorded
          ELSE UNCHANGED <<store, recorded>>
       /\ UNCHANGED <<now, deployment, envelope, answer, effects, cancelled, spent, replies, faults, decisions>>

(***************************************************************************)
(* Replica r receives c's retry of a with "accept", and its Redeem finds   *)
(* an outcome: the retry is answered from the record -- the result of the  *)
(* one execution, or "in doubt" -- and nothing runs.  replies[a] records   *)
(* the answer.  (A retry that finds a acting gets "in progress"; one that  *)
(* finds it pending redeems it: those are Redeem and a stuttering step.)   *)
(* With the "replay-reruns" flaw a retry of a done or failed approval is   *)
(* answered by running the action again.                                   *)
(***************************************************************************)
Replay(c, r, a) ==
    LET rec == store[StoreOf(r)][a] IN
    /\ Admitted(c, a, "accept")
    /\ rec.status \in Final
    /\ IF Flaw = "replay-reruns" /\ rec.status \in {"done", "failed"}
       THEN \E k \in Kinds :
               /\ effects' = [effects EXCEPT ![a] = Append(@, [client |-> c, at |-> now, kind |-> k])]
               /\ replies' = [replies EXCEPT ![a] = @ \cup
                                {IF k = "unknown" THEN InDoubt
                                 ELSE [kind |-> k, exec |-> Len(effects[a]) + 1]}]
       ELSE /\ replies' = [replies EXCEPT ![a] = @ \cup {OutcomeOf(rec)}]
            /\ UNCHANGED effects
    /\ Answered(c, a, "accept")
    /\ UNCHANGED <<now, deployment, envelope, store, req, cancelled, spent, recorded, faults, decisions>>

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
    /\ Answered(c, a, "decline")
    /\ UNCHANGED <<now, deployment, envelope, req, effects, spent, recorded, replies, faults, decisions>>

(***************************************************************************)
(* Approver p, signed in on the approval page served by replica r, decides *)
(* a: Ledger.Decide, one atomic step in r's store on its clock.  It        *)
(* records p's decision only if a needs approvals, is pending and          *)
(* unexpired, p is authorized and is not a's requester, and nothing is     *)
(* decided yet: p has not decided, the approvals are not all in, and no    *)
(* one declined.  Otherwise it changes nothing, and the page shows what is *)
(* recorded.  An approval leaves the record pending (Redeem acts once all  *)
(* are in); a decline cancels it, for good.  The flaws of the controls     *)
(* each drop one of the checks.                                            *)
(***************************************************************************)
Decide(p, r, a, yes) ==
    LET s   == StoreOf(r)
        rec == store[s][a]
    IN /\ rec.need > 0
       /\ rec.status = "pending"
       /\ now < rec.exp
       /\ p \in Authorized \/ Flaw = "unlisted-approver"
       /\ p # rec.requester \/ Flaw = "self-approval"
       /\ (rec.dec[p] = "none" /\ ~Decided(rec)) \/ Flaw = "decide-twice"
       /\ store' = [store EXCEPT ![s][a].dec[p] = IF yes THEN "approve" ELSE "decline",
                                 ![s][a].status = IF yes THEN "pending" ELSE "cancelled"]
       /\ cancelled' = IF yes THEN cancelled ELSE [cancelled EXCEPT ![a] = TRUE]
       /\ decisions' = [decisions EXCEPT ![a] = Append(@, [who |-> p, yes |-> yes])]
       /\ UNCHANGED <<now, deployment, envelope, answer, req, effects, spent, recorded, replies, faults>>

(***************************************************************************)
(* Store s forgets a once max(expiry, lease) + Grace has passed: pending   *)
(* records, outcomes and cancelled tombstones alike.  A replay after this  *)
(* gets ErrUnknown from the store -- but its sealed state, with the same   *)
(* expiry, is refused by the boundary first, so every retry the boundary   *)
(* admits is answered from the record.                                     *)
(***************************************************************************)
Forget(s, a) ==
    /\ store[s][a].status # "absent"
    /\ now >= Max(store[s][a].exp, store[s][a].lease) + Grace
    /\ store' = [store EXCEPT ![s][a] = Absent]
    /\ UNCHANGED <<now, deployment, envelope, answer, req, effects, cancelled, spent, recorded, replies, faults, decisions>>

(***************************************************************************)
(* Replica r crashes and restarts.  Every request it was handling is       *)
(* dropped (its clients see a broken connection and may retry); an effect  *)
(* or an outcome it owed after a successful Redeem is never reported, and  *)
(* the record stays acting until its lease ends.  In the "memory"          *)
(* deployment its store comes back empty; a shared store is untouched.     *)
(***************************************************************************)
Restart(r) ==
    /\ store' = IF deployment = "memory"
                   THEN [store EXCEPT ![r] = [a \in Approvals |-> Absent]]
                   ELSE store
    /\ req' = [c \in Clients |-> IF req[c].rep = r THEN Idle ELSE req[c]]
    /\ faults' = [a \in Approvals |->
                    IF \E c \in Clients : /\ req[c].rep = r
                                          /\ req[c].phase \in {"acting", "acted"}
                                          /\ req[c].appr = a
                    THEN faults[a] \cup {"crash"} ELSE faults[a]]
    /\ UNCHANGED <<now, deployment, envelope, answer, effects, cancelled, spent, recorded, replies, decisions>>

(***************************************************************************)
(* The clock moves on to t.  Every record still acting whose lease has     *)
(* ended by t is in doubt from now on (the stores' lazy "in doubt",        *)
(* decided here once), and that is its recorded outcome.  If the replica   *)
(* that redeemed it is still working on it, it overran its lease.          *)
(***************************************************************************)
PassTime(t) ==
    LET Lapsed(s, a) == store[s][a].status = "acting" /\ store[s][a].lease <= t
        Overran(a) == \E c \in Clients : req[c].appr = a /\ req[c].phase \in {"acting", "acted"}
    IN /\ now' = t
       /\ store' = [s \in Stores |-> [a \in Approvals |->
                      IF Lapsed(s, a) THEN [store[s][a] EXCEPT !.status = "doubt"] ELSE store[s][a]]]
       /\ recorded' = [a \in Approvals |->
                         IF recorded[a] = NoOutcome /\ \E s \in Stores : Lapsed(s, a)
                         THEN InDoubt ELSE recorded[a]]
       /\ faults' = [a \in Approvals |->
                       IF (\E s \in Stores : Lapsed(s, a)) /\ Overran(a)
                       THEN faults[a] \cup {"lease"} ELSE faults[a]]

(* Time passes. *)
Tick ==
    /\ PassTime(now + 1)
    /\ UNCHANGED <<deployment, envelope, answer, req, effects, cancelled, spent, replies, decisions>>

Next ==
    \/ \E r \in Replicas, a \in Approvals, n \in Quorums, q \in Approvers \cup {None} : Issue(r, a, n, q)
    \/ \E p \in Approvers, r \in Replicas, a \in Approvals, yes \in BOOLEAN : Decide(p, r, a, yes)
    \/ \E c \in Clients, r \in Replicas, a \in Approvals :
          Redeem(c, r, a) \/ RedeemCheck(c, r, a) \/ Replay(c, r, a) \/ Cancel(c, r, a)
    \/ \E c \in Clients : RedeemAct(c) \/ DoEffect(c) \/ Complete(c)
    \/ \E s \in Stores, a \in Approvals : Forget(s, a)
    \/ \E r \in Replicas : Restart(r)
    \/ Tick

\* A replica that holds a redeemed request and stays up eventually acts on
\* it and records the outcome.
Fairness == \A c \in Clients : WF_vars(DoEffect(c)) /\ WF_vars(Complete(c))

Spec == Init /\ [][Next]_vars /\ Fairness

-----------------------------------------------------------------------------
(* Safety. *)

\* No approval's action runs twice.
AtMostOnce == \A a \in Approvals : Len(effects[a]) <= 1

\* Every execution of a was on the retry of a client in which the human accepted a itself.
NoEffectWithoutConfirmation ==
    \A a \in Approvals : \A i \in 1..Len(effects[a]) :
        answer[effects[a][i].client][a] = "accept"

\* Every execution was authorized by a Redeem strictly before the approval's expiry.
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
        \A s \in Stores : store[s][a].status \in Redeemed \cup {"absent"}

\* Every answer to a retry of a done (failed, in doubt) approval is the one
\* recorded outcome: the first outcome any store recorded for it.  So every
\* retry of one approval gets the same answer, and never a second execution's.
ReplayEqualsRecord == \A a \in Approvals : \A o \in replies[a] : o = recorded[a]

\* What any store or answer says about a.
Outcomes(a) == {recorded[a]} \cup replies[a] \cup {OutcomeOf(store[s][a]) : s \in Stores}

\* An outcome that says done or failed names an execution that happened and
\* reported exactly that.
NoOutcomeWithoutEffect ==
    \A a \in Approvals : \A o \in Outcomes(a) : o.kind \in {"done", "failed"} =>
        /\ o.exec \in 1..Len(effects[a])
        /\ effects[a][o.exec].kind = o.kind

\* An action that ran and did not report failure (done, or unknown: it may
\* have happened) is never reported as not done: no record or answer says it
\* failed, and no store holds its approval as pending or cancelled.
NoEffectReportedNotDone ==
    \A a \in Approvals : (\E i \in 1..Len(effects[a]) : effects[a][i].kind # "failed") =>
        /\ \A o \in Outcomes(a) : o.kind # "failed"
        /\ \A s \in Stores : store[s][a].status \notin {"pending", "cancelled"}

\* Nothing is ever said to be in doubt unless the replica that redeemed it
\* crashed before Complete, overran its lease, or reported an unknown outcome.
DoubtOnlyAfterCrashOrLease ==
    \A a \in Approvals : (\E o \in Outcomes(a) : o.kind = "doubt") => faults[a] # {}

\* Redeemed records only move forward -- acting to done, failed or in doubt --
\* and an outcome, once recorded, never changes; any record may be forgotten.
SpentIsFinal ==
    [][\A s \in Stores, a \in Approvals :
         /\ store[s][a].status = "acting" => store'[s][a].status \in Redeemed \cup {"absent"}
         /\ store[s][a].status \in Final => store'[s][a] \in {store[s][a], Absent}]_vars

(* Safety of out-of-band approval. *)

\* The approvers whose approval (decline) of a some store recorded.
ApprovedBy(a) == {decisions[a][i].who : i \in {j \in 1..Len(decisions[a]) : decisions[a][j].yes}}
DeclinedBy(a) == {decisions[a][i].who : i \in {j \in 1..Len(decisions[a]) : ~decisions[a][j].yes}}

\* No redemption without the recorded approval of as many distinct
\* authorized approvers as a needs, none of them its requester, and no
\* decline.  (In band a needs none, and no decision is ever recorded.)
NoRedeemWithoutApproval ==
    \A a \in Approvals : spent[a] =>
        /\ Cardinality((ApprovedBy(a) \cap Authorized) \ {envelope[a].requester}) >= envelope[a].need
        /\ DeclinedBy(a) = {}

\* Every decision recorded is by an authorized approver.
OnlyAuthorizedDecide ==
    \A a \in Approvals : \A i \in 1..Len(decisions[a]) : decisions[a][i].who \in Authorized

\* Four-eyes: no decision recorded for a is by a's requester.
NoSelfDecision ==
    \A a \in Approvals : \A i \in 1..Len(decisions[a]) : decisions[a][i].who # envelope[a].requester

\* A decision is recorded once: each approver decides a at most once, and no
\* decision is recorded once a's outcome was decided -- all the approvals
\* it needs in, or a decline.  So a needing none takes no decision at all.
DecidedOnce ==
    \A a \in Approvals : \A i \in 1..Len(decisions[a]) :
        LET before == {decisions[a][j] : j \in 1..(i - 1)} IN
        /\ \A d \in before : d.who # decisions[a][i].who /\ d.yes
        /\ Cardinality(before) < envelope[a].need

Safe ==
    /\ TypeOK
    /\ AtMostOnce
    /\ NoEffectWithoutConfirmation
    /\ NoEffectAfterExpiry
    /\ NoEffectAfterDecline
    /\ SpentStaysSpent
    /\ ReplayEqualsRecord
    /\ NoOutcomeWithoutEffect
    /\ NoEffectReportedNotDone
    /\ DoubtOnlyAfterCrashOrLease
    /\ NoRedeemWithoutApproval
    /\ OnlyAuthorizedDecide
    /\ NoSelfDecision
    /\ DecidedOnce

(* Liveness. *)

\* A successful Redeem is eventually followed by its execution, unless the
\* replica that redeemed crashed first.
RedeemLeadsToEffect ==
    \A a \in Approvals : spent[a] ~> (effects[a] # <<>> \/ "crash" \in faults[a])

\* Without a crash, a lease overrun or an unknown outcome, every redeemed
\* approval ends done or failed.
RedeemEndsDoneOrFailed ==
    \A a \in Approvals : spent[a] ~> (recorded[a].kind \in {"done", "failed"} \/ faults[a] # {})

THEOREM Spec => []Safe
THEOREM Spec => SpentIsFinal /\ RedeemLeadsToEffect /\ RedeemEndsDoneOrFailed
=============================================================================
