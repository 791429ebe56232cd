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
(* p's, and no client can take one.  Only the Authorized approvers may     *)
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
(*  - time and clocks: real time (now) and, MaxSkew ticks ahead of or      *)
(*    behind it, each replica's clock (which sets the expiry it issues and *)
(*    checks sealed states) and each store's clock (which decides expiry   *)
(*    and leases), stepping forward or back at any time; the store guards  *)
(*    against a step back by never deciding on a time before one it        *)
(*    already used (a step back is seen as its clock standing still);      *)
(*  - the store deciding a lease's end when it reads the record: a read of *)
(*    a record acting at or after its lease answers "in doubt" and may     *)
(*    write it (the memory store and Redis do, PostgreSQL does not), and   *)
(*    Complete refuses it either way;                                      *)
(*  - lease renewal by the replica that redeemed, while the lease lasts,   *)
(*    never past the Redeem plus MaxLease: after HoldBound no retry is     *)
(*    told "in progress" (InProgressBounded);                              *)
(*  - a shared store with a standby (Standby): the standby applies the     *)
(*    primary's writes in order, and a failover promotes it with what it   *)
(*    applied, a prefix of the writes; the replica acts on a Redeem, and   *)
(*    answers a Cancel, only once the standby acknowledged the write, and  *)
(*    fails closed when no acknowledgement comes;                          *)
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
(* An approval a retry was told had expired is never redeemed              *)
(* (ExpiredStaysExpired), and no retry is told "in progress" HoldBound     *)
(* after the Redeem (InProgressBounded).  A failover loses no              *)
(* acknowledged write, so none of this changes -- except that a retry may  *)
(* be told "in doubt" where another is told the outcome (see               *)
(* ReplayEqualsRecord).                                                    *)
(* And with out-of-band approval: no redemption without N recorded         *)
(* approvals by distinct authorized approvers, none of them the requester  *)
(* (NoRedeemWithoutApproval); every decision recorded is by an authorized  *)
(* approver (OnlyAuthorizedDecide) who is not the requester                *)
(* (NoSelfDecision), at most once per approver and never after the         *)
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
(*  - Clocks.  Expiry and leases are stated against the clock of the       *)
(*    store that decides them (NoEffectAfterExpiry); in real time an       *)
(*    approval lives TTL plus the issuer's skew minus the store's.  A      *)
(*    replica's clock keeps its skew for the whole behaviour; a clock step *)
(*    at issue is a replica with another skew.  The memory store shares    *)
(*    its replica's monotonic clock: skew and steps are explored in the    *)
(*    shared deployment (LedgerClock.cfg).  Steps and failover are         *)
(*    explored apart (LedgerFailover.cfg keeps clocks in step): a promoted *)
(*    standby's clock must be guarded as a step would be.                  *)
(*  - Refused operations (unknown, cancelled; a Complete refused other     *)
(*    than for a lapsed lease) change no state: they are stuttering steps  *)
(*    and are not written as actions, except a Replay, which records the   *)
(*    final answer it gave in the history variable replies, and the reads  *)
(*    that the properties need to see: "in progress" (InProgress),         *)
(*    "expired" (TellExpired).  TraceLedger.tla checks that the Go ledger  *)
(*    answers what the store's state implies.                              *)
(*  - Networks.  A request reaches its replica in the step that processes  *)
(*    it; a lost reply is the client retrying.  A store keeps every write  *)
(*    it acknowledged, except the shared primary's writes its standby had  *)
(*    not applied when it failed over (at most one failover; Decide waits  *)
(*    for no acknowledgement: LedgerFailover.cfg is in band).  A replica   *)
(*    restarts in the same step it crashes.                                *)
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
(*    from any signed-in approver, authorized or not;                      *)
(*  - "act-before-ack" (LedgerUnacked.cfg): the replica acts on a Redeem   *)
(*    the standby has not acknowledged (asynchronous replication): the     *)
(*    standby is promoted without it, and the approval takes effect twice; *)
(*  - "clock-unguarded" (LedgerClockStep.cfg): the store decides on its    *)
(*    clock as it is: stepped back, it redeems an approval a retry was     *)
(*    told had expired;                                                    *)
(*  - "unbounded-renewal" (LedgerRenewUnbounded.cfg): renewal without the  *)
(*    MaxLease cap keeps a retry "in progress" past HoldBound;             *)
(*  - "stale-read" (LedgerStaleRead.cfg): a read of an acting record does  *)
(*    not look at its lease: "in progress" past HoldBound;                 *)
(*  - "complete-no-lease" (LedgerLateComplete.cfg): Complete of an acting  *)
(*    record without its lease check: after a read told a retry "in doubt" *)
(*    without writing it, a late Complete records done;                    *)
(*  - "no-store-expiry" (LedgerNoStoreExpiry.cfg): Redeem leaves expiry to *)
(*    the boundary, on a replica's clock behind the store's: an approval   *)
(*    is redeemed after its expiry.                                        *)
(*                                                                         *)
(* MCLedger.tla holds the TLC-only definitions; TraceLedger.tla checks     *)
(* logs of the Go ledger (impl/ledger) against this module.                *)
(***************************************************************************)
EXTENDS Integers, Sequences, FiniteSets

CONSTANTS
    Replicas,     \* server replicas behind one load balancer (model values)
    Clients,      \* MCP clients retrying calls (model values)
    Approvals,    \* approval ids; each one is a fresh random id (model values)
    Shared,       \* the name of the one shared store (a model value)
    None,         \* the empty slot of an idle request (a model value)
    Deployments,  \* nonempty subset of {"shared", "memory"}: the deployments to explore
    TTL,          \* lifetime of an approval and of its sealed state, in ticks
    Lease,        \* how long the replica that redeemed has to act and Complete, in ticks
    MaxLease,     \* the longest a redeemed record may stay acting, renewals included (>= Lease)
    Grace,        \* how long the store remembers a record after max(expiry, lease)
    MaxSkew,      \* the most any clock is ahead of or behind real time, in ticks
    Standby,      \* TRUE: the shared store has a standby it may fail over to
    DoubtWrites,  \* nonempty subset of BOOLEAN: may a read that finds a lease ended write "in doubt"?
    Approvers,    \* people who may sign in to the approval page (model values)
    Authorized,   \* the approvers allowed to decide (a subset of Approvers)
    Quorums,      \* the numbers of distinct approvals a confirmation may need; 0: in band only
    Flaw          \* "none": the ledger as built; otherwise the broken design of a control

Flaws == {"none", "check-then-act", "replay-reruns", "blind-complete",
          "self-approval", "decide-twice", "redeem-unapproved", "unlisted-approver",
          "act-before-ack", "clock-unguarded", "unbounded-renewal", "complete-no-lease",
          "no-store-expiry", "stale-read"}

ASSUME /\ Deployments # {} /\ Deployments \subseteq {"shared", "memory"}
       /\ TTL \in Nat \ {0} /\ Lease \in Nat \ {0} /\ Grace \in Nat
       /\ MaxLease \in Nat /\ MaxLease >= Lease /\ MaxSkew \in Nat
       /\ Standby \in BOOLEAN /\ DoubtWrites # {} /\ DoubtWrites \subseteq BOOLEAN
       /\ Flaw \in Flaws
       /\ Shared \notin Replicas /\ None \notin Replicas \cup Approvals \cup Approvers
       /\ Authorized \subseteq Approvers
       /\ Quorums # {} /\ Quorums \subseteq Nat

VARIABLES
    now,           \* real time (see "Time and clocks" above)
    rskew,         \* rskew[r]: how far replica r's clock is ahead of real time (fixed)
    soff,          \* soff[s]: how far the clock store s decides on is ahead of real time
    deployment,    \* "shared" or "memory"; chosen initially, never changes
    envelope,      \* envelope[a]: was a issued, and the expiry sealed into its requestState
    store,         \* store[s][a]: the record store s holds for approval a (of Shared: the primary's)
    standby,       \* standby[a]: the shared store's standby's copy of a's record
    log,           \* the writes to the shared primary its standby has not applied yet, oldest first
    promoted,      \* the standby was promoted (a failover happened; at most one is modelled)
    answer,        \* answer[c][a]: what the human answered to a in client c
    req,           \* req[c]: the request client c has in flight after a successful check
    effects,       \* history: effects[a], one record per execution of a's action
    cancelled,     \* history: cancelled[a], some Cancel of a succeeded
    spentAt,       \* history: spentAt[a], when (real time) a Redeem of a succeeded; NotSpent if none
    recorded,      \* history: recorded[a], the first outcome any store recorded or decided for a
    replies,       \* history: replies[a], the final answers retries of a were given
    faults,        \* history: faults[a], why a's outcome may be unknown (see Faults)
    decisions,     \* history: decisions[a], every decision any store recorded for a, in order
    lateProgress,  \* history: lateProgress[a], a retry was told "in progress" HoldBound or more after the Redeem
    expiredTold    \* history: expiredTold[a], a retry of a was told it had expired

vars == <<now, rskew, soff, deployment, envelope, store, standby, log, promoted, answer, req,
          effects, cancelled, spentAt, recorded, replies, faults, decisions, lateProgress, expiredTold>>

\* Groups of variables, for UNCHANGED.
clockVars == <<now, rskew, soff>>
replicaVars == <<standby, promoted>>
tellVars == <<lateProgress, expiredTold>>

-----------------------------------------------------------------------------
(* Types and helpers. *)

Stores == Replicas \cup {Shared}

\* The store replica r reads and writes in the current deployment.
StoreOf(r) == IF deployment = "shared" THEN Shared ELSE r

\* The stores in use in the current deployment: their clocks may step.
UsedStores == IF deployment = "shared" THEN {Shared} ELSE Replicas

Max(x, y) == IF x >= y THEN x ELSE y
Min(x, y) == IF x <= y THEN x ELSE y

\* How far a clock may be from real time.
Skews == -MaxSkew..MaxSkew

\* The clock replica r issues and checks sealed states on, and the clock
\* store s decides on.
ReplicaNow(r) == now + rskew[r]
StoreNow(s) == now + soff[s]

\* Past this long after its Redeem (real time), no retry may be told that
\* a's action is in progress: the longest lease, renewals included, plus
\* what the store's clock may lag (MaxSkew then) and lead (MaxSkew at the
\* Redeem) real time.
HoldBound == MaxLease + 2 * MaxSkew

NotSpent == -1
spent == [a \in Approvals |-> spentAt[a] # NotSpent]

\* "acting": redeemed, the replica holds the lease; done, failed, doubt: the outcome.
Status == {"absent", "pending", "acting", "done", "failed", "doubt", "cancelled"}
Redeemed == {"acting", "done", "failed", "doubt"}
Final == {"done", "failed", "doubt"}
\* A decision slot of a record: approver p has not decided, approved, declined.
Verdicts == {"none", "approve", "decline"}
NoVerdicts == [p \in Approvers |-> "none"]

\* exp: the expiry (the issuing replica's clock plus TTL); lease: LeaseUntil,
\* set by Redeem, moved on by a renewal; since: the store's clock at the
\* Redeem, which bounds renewals; exec: the execution whose result a done
\* or failed record holds (0 otherwise); need: the approvals it needs (0:
\* in band); requester: who asked, in the approvers' naming (None: no one
\* of them), never to decide; dec: each approver's recorded decision.
Record == [status : Status, exp : Int, lease : Int, since : Int, exec : Nat,
           need : Quorums \cup {0}, requester : Approvers \cup {None}, dec : [Approvers -> Verdicts]]
Absent == [status |-> "absent", exp |-> 0, lease |-> 0, since |-> 0, exec |-> 0,
           need |-> 0, requester |-> None, dec |-> NoVerdicts]

\* One write to the shared primary, as its standby will apply it.
Write == [appr : Approvals, rec : Record]

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
Envelope == [issued : BOOLEAN, exp : Int, need : Quorums \cup {0}, requester : Approvers \cup {None}]
NotIssued == [issued |-> FALSE, exp |-> 0, need |-> 0, requester |-> None]

\* One decision recorded: who, and whether they approved.
Decision == [who : Approvers, yes : BOOLEAN]

Answers == {"none", "accept", "decline"}

\* What one execution of the action reports: it happened, it failed (refused
\* or errored), or the replica cannot tell (the proxy lost the upstream's reply).
Kinds == {"done", "failed", "unknown"}

\* "checked" only occurs with the check-then-act flaw: the status was read,
\* not yet written.  "waiting": redeemed on the shared primary, the
\* standby's acknowledgement awaited before acting; "cancelling": likewise
\* for a Cancel, before answering.  "acting": redeemed, the effect is owed;
\* "acted": the effect ran and reported kind, its outcome is owed (Complete).
\* pos: while waiting or cancelling, how many writes in the log up to and
\* including this request's (0: all applied, acknowledged).
Phases == {"idle", "checked", "waiting", "cancelling", "acting", "acted"}
Request == [phase : Phases, appr : Approvals \cup {None}, rep : Replicas \cup {None},
            at : Int, kind : Kinds \cup {"none"}, exec : Nat, pos : Nat]
Idle == [phase |-> "idle", appr |-> None, rep |-> None, at |-> 0, kind |-> "none", exec |-> 0, pos |-> 0]

\* One execution of the action: on whose retry, at what store time its
\* Redeem succeeded, what it reported.
Effect == [client : Clients, at : Int, kind : Kinds]

\* Why an approval's outcome may be unknown: the replica that redeemed it
\* crashed before Complete, it was still working when the lease ended, the
\* execution reported an unknown outcome, or a write of it to the shared
\* store was never acknowledged by the standby (lost in a failover, or
\* given up on: the Redeem's replica did not act).
Faults == {"crash", "lease", "unknown", "unacked"}

TypeOK ==
    /\ now \in Nat
    /\ rskew \in [Replicas -> Skews]
    /\ soff \in [Stores -> Skews]
    /\ deployment \in Deployments
    /\ envelope \in [Approvals -> Envelope]
    /\ store \in [Stores -> [Approvals -> Record]]
    /\ standby \in [Approvals -> Record]
    /\ log \in Seq(Write)
    /\ promoted \in BOOLEAN
    /\ answer \in [Clients -> [Approvals -> Answers]]
    /\ req \in [Clients -> Request]
    /\ effects \in [Approvals -> Seq(Effect)]
    /\ cancelled \in [Approvals -> BOOLEAN]
    /\ spentAt \in [Approvals -> Nat \cup {NotSpent}]
    /\ recorded \in [Approvals -> Outcome]
    /\ replies \in [Approvals -> SUBSET Outcome]
    /\ faults \in [Approvals -> SUBSET Faults]
    /\ decisions \in [Approvals -> Seq(Decision)]
    /\ lateProgress \in [Approvals -> BOOLEAN]
    /\ expiredTold \in [Approvals -> BOOLEAN]

-----------------------------------------------------------------------------
Init ==
    /\ now = 0
    /\ rskew \in [Replicas -> Skews]
    /\ soff = [s \in Stores |-> 0]
    /\ deployment \in Deployments
    /\ envelope = [a \in Approvals |-> NotIssued]
    /\ store = [s \in Stores |-> [a \in Approvals |-> Absent]]
    /\ standby = [a \in Approvals |-> Absent]
    /\ log = <<>>
    /\ promoted = FALSE
    /\ answer = [c \in Clients |-> [a \in Approvals |-> "none"]]
    /\ req = [c \in Clients |-> Idle]
    /\ effects = [a \in Approvals |-> <<>>]
    /\ cancelled = [a \in Approvals |-> FALSE]
    /\ spentAt = [a \in Approvals |-> NotSpent]
    /\ recorded = [a \in Approvals |-> NoOutcome]
    /\ replies = [a \in Approvals |-> {}]
    /\ faults = [a \in Approvals |-> {}]
    /\ decisions = [a \in Approvals |-> <<>>]
    /\ lateProgress = [a \in Approvals |-> FALSE]
    /\ expiredTold = [a \in Approvals |-> FALSE]

(***************************************************************************)
(* Store s's record of a becomes rec.  With a standby, a write to the      *)
(* shared primary is also appended to the replication log, which the       *)
(* standby applies in order (Apply): what a failover keeps is a prefix of  *)
(* the writes.  Every action that writes a record writes it through Put.   *)
(***************************************************************************)
Put(s, a, rec) ==
    /\ store' = [store EXCEPT ![s][a] = rec]
    /\ log' = IF s = Shared /\ Standby THEN Append(log, [appr |-> a, rec |-> rec]) ELSE log

\* A write to store s is acknowledged by the standby before the replica
\* acts on it (Redeem) or reports it (Cancel).  "act-before-ack" does not wait.
Waits(s) == s = Shared /\ Standby /\ Flaw # "act-before-ack"

(***************************************************************************)
(* Replica r handles a destructive tools/call and asks for confirmation:   *)
(* Ledger.Issue stores a fresh id as pending in r's store with expiry      *)
(* ReplicaNow(r) + TTL -- the issuing replica's clock, skew and all -- and *)
(* the same expiry is sealed into the requestState that every client may   *)
(* now hold (and replay).  The confirmation needs n out-of-band approvals  *)
(* (0: none), and its requester is q in the approvers' naming -- possibly  *)
(* an approver, the case four-eyes is for -- or None.                      *)
(***************************************************************************)
Requesters(n) == IF n = 0 THEN {None} ELSE Approvers \cup {None}

Issue(r, a, n, q) ==
    /\ ~envelope[a].issued
    /\ n \in Quorums /\ q \in Requesters(n)
    /\ envelope' = [envelope EXCEPT ![a] = [issued |-> TRUE, exp |-> ReplicaNow(r) + TTL, need |-> n, requester |-> q]]
    /\ Put(StoreOf(r), a, [Absent EXCEPT !.status = "pending", !.exp = ReplicaNow(r) + TTL, !.need = n, !.requester = q])
    /\ UNCHANGED <<clockVars, deployment, replicaVars, answer, req, effects, cancelled, spentAt, recorded,
                   replies, faults, decisions, tellVars>>

(***************************************************************************)
(* The boundary lets client c's retry of a, carrying answer ans, through   *)
(* to replica r: c has no request in flight, the sealed state verifies and *)
(* is unexpired on r's clock, and ans is the human's answer to a in c.     *)
(* The human is shown the question once per client and answers it once;    *)
(* the answer travels with every retry of c and is recorded in             *)
(* answer[c][a] by the first retry that changes the ledger (Answered).  A  *)
(* retry the ledger refuses records nothing, so a client whose refused     *)
(* retry carried one answer may later carry the other: more behaviours,    *)
(* never fewer.  The question shown in two clients may be accepted in one  *)
(* and declined in the other.                                              *)
(***************************************************************************)
Admitted(c, r, a, ans) ==
    /\ req[c].phase = "idle"
    /\ envelope[a].issued
    /\ ReplicaNow(r) < envelope[a].exp
    /\ answer[c][a] \in {"none", ans}

Answered(c, a, ans) == answer' = [answer EXCEPT ![c][a] = ans]

\* The store check inside Ledger.Redeem/Cancel: pending and unexpired on
\* the store's clock.  "no-store-expiry" leaves the expiry to the boundary's
\* check on the replica's clock (for Redeem).
Unexpired(s, a) == StoreNow(s) < store[s][a].exp
Redeemable(s, a) == store[s][a].status = "pending" /\ Unexpired(s, a)

\* The further check inside Ledger.Redeem: the approvals a needs are recorded
\* (none needed in band).  The "redeem-unapproved" flaw skips it.
ApprovedIn(s, a) == Approved(store[s][a]) \/ Flaw = "redeem-unapproved"

\* a's record in store s once redeemed at the store's current time: acting,
\* lease granted.
Acting(s, a) == [store[s][a] EXCEPT !.status = "acting", !.lease = StoreNow(s) + Lease, !.since = StoreNow(s)]

\* The request of client c, on replica r, once its Redeem of a wrote acting
\* in store s: acting at once, or waiting for the standby's acknowledgement.
RedeemedReq(c, r, a, s) ==
    [Idle EXCEPT !.phase = IF Waits(s) THEN "waiting" ELSE "acting", !.appr = a, !.rep = r,
                 !.at = StoreNow(s), !.pos = IF Waits(s) THEN Len(log) + 1 ELSE 0]

(***************************************************************************)
(* Replica r receives c's retry of a with "accept" and calls               *)
(* Ledger.Redeem: one atomic compare-and-set pending -> acting in r's      *)
(* store, on the store's clock, with LeaseUntil = StoreNow + Lease, only   *)
(* once the approvals it needs are recorded.  On success r owes the effect *)
(* and the outcome -- on a shared store with a standby, once the standby   *)
(* has acknowledged the write (Acked); on any error (awaiting approval     *)
(* among them) nothing changes.                                            *)
(***************************************************************************)
Redeem(c, r, a) ==
    LET s == StoreOf(r) IN
    /\ Flaw # "check-then-act"
    /\ Admitted(c, r, a, "accept")
    /\ store[s][a].status = "pending"
    /\ Unexpired(s, a) \/ Flaw = "no-store-expiry"
    /\ ApprovedIn(s, a)
    /\ Put(s, a, Acting(s, a))
    /\ req' = [req EXCEPT ![c] = RedeemedReq(c, r, a, s)]
    /\ spentAt' = IF Waits(s) THEN spentAt ELSE [spentAt EXCEPT ![a] = now]
    /\ Answered(c, a, "accept")
    /\ UNCHANGED <<clockVars, deployment, envelope, replicaVars, effects, cancelled, recorded, replies,
                   faults, decisions, tellVars>>

(***************************************************************************)
(* Negative control "check-then-act", first half: a store without          *)
(* compare-and-set.  Replica r reads a's record and finds it pending and   *)
(* unexpired ...                                                           *)
(***************************************************************************)
RedeemCheck(c, r, a) ==
    /\ Flaw = "check-then-act"
    /\ Admitted(c, r, a, "accept")
    /\ Redeemable(StoreOf(r), a)
    /\ ApprovedIn(StoreOf(r), a)
    /\ req' = [req EXCEPT ![c] = [Idle EXCEPT !.phase = "checked", !.appr = a, !.rep = r, !.at = StoreNow(StoreOf(r))]]
    /\ Answered(c, a, "accept")
    /\ UNCHANGED <<clockVars, deployment, envelope, store, log, replicaVars, effects, cancelled, spentAt,
                   recorded, replies, faults, decisions, tellVars>>

(***************************************************************************)
(* ... and, in a later step, writes "acting" without looking again.        *)
(* Anything may have happened to the record in between.                    *)
(***************************************************************************)
RedeemAct(c) ==
    LET s == StoreOf(req[c].rep)
        a == req[c].appr
    IN /\ req[c].phase = "checked"
       /\ Put(s, a, Acting(s, a))
       /\ req' = [req EXCEPT ![c] = RedeemedReq(c, req[c].rep, a, s)]
       /\ spentAt' = IF Waits(s) THEN spentAt ELSE [spentAt EXCEPT ![a] = now]
       /\ UNCHANGED <<clockVars, deployment, envelope, replicaVars, answer, effects, cancelled, recorded,
                      replies, faults, decisions, tellVars>>

(***************************************************************************)
(* The shared primary's standby applies the oldest write it has not        *)
(* applied yet.  A request waiting for its write's acknowledgement gets it *)
(* once every write up to its own is applied (pos reaches 0).              *)
(***************************************************************************)
Apply ==
    /\ log # <<>>
    /\ standby' = [standby EXCEPT ![Head(log).appr] = Head(log).rec]
    /\ log' = Tail(log)
    /\ req' = [c \in Clients |-> IF req[c].pos > 0 THEN [req[c] EXCEPT !.pos = @ - 1] ELSE req[c]]
    /\ UNCHANGED <<clockVars, deployment, envelope, store, promoted, answer, effects, cancelled, spentAt,
                   recorded, replies, faults, decisions, tellVars>>

(***************************************************************************)
(* The standby acknowledged client c's write: a Redeem succeeds (its       *)
(* replica may act now), a Cancel is answered, cancelled.                  *)
(***************************************************************************)
Acked(c) ==
    LET a == req[c].appr IN
    /\ req[c].phase \in {"waiting", "cancelling"}
    /\ req[c].pos = 0
    /\ IF req[c].phase = "waiting"
       THEN /\ req' = [req EXCEPT ![c].phase = "acting"]
            /\ spentAt' = [spentAt EXCEPT ![a] = now]
            /\ UNCHANGED cancelled
       ELSE /\ req' = [req EXCEPT ![c] = Idle]
            /\ cancelled' = [cancelled EXCEPT ![a] = TRUE]
            /\ UNCHANGED spentAt
    /\ UNCHANGED <<clockVars, deployment, envelope, store, log, replicaVars, answer, effects, recorded,
                   replies, faults, decisions, tellVars>>

(***************************************************************************)
(* No acknowledgement in time (Redis WAIT's timeout, a synchronous standby *)
(* that does not answer): the replica fails closed.  A Redeem's replica    *)
(* does not act, and the approval is in doubt once its lease ends; a       *)
(* Cancel's caller is told its decline may not have been recorded.         *)
(***************************************************************************)
GiveUp(c) ==
    LET a == req[c].appr IN
    /\ req[c].phase \in {"waiting", "cancelling"}
    /\ req' = [req EXCEPT ![c] = Idle]
    /\ faults' = IF req[c].phase = "waiting" THEN [faults EXCEPT ![a] = @ \cup {"unacked"}] ELSE faults
    /\ UNCHANGED <<clockVars, deployment, envelope, store, log, replicaVars, answer, effects, cancelled,
                   spentAt, recorded, replies, decisions, tellVars>>

(***************************************************************************)
(* The shared primary fails and its standby is promoted, holding the       *)
(* writes it had applied: a prefix of the primary's.  The rest are lost.   *)
(* Every request still waiting for an acknowledgement fails closed, as in  *)
(* GiveUp.  A fresh standby copies the new primary; no second failover is  *)
(* modelled.                                                               *)
(***************************************************************************)
Failover ==
    /\ Standby /\ ~promoted /\ deployment = "shared"
    /\ store' = [store EXCEPT ![Shared] = standby]
    /\ log' = <<>>
    /\ promoted' = TRUE
    /\ req' = [c \in Clients |-> IF req[c].phase \in {"waiting", "cancelling"} THEN Idle ELSE req[c]]
    /\ faults' = [a \in Approvals |->
                    IF \/ \E k \in 1..Len(log) : log[k].appr = a
                       \/ \E c \in Clients : req[c].phase = "waiting" /\ req[c].appr = a
                    THEN faults[a] \cup {"unacked"} ELSE faults[a]]
    /\ UNCHANGED <<clockVars, deployment, envelope, standby, answer, effects, cancelled, spentAt, recorded,
                   replies, decisions, tellVars>>

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
    /\ UNCHANGED <<clockVars, deployment, envelope, store, log, replicaVars, answer, cancelled, spentAt,
                   recorded, replies, decisions, tellVars>>

(***************************************************************************)
(* The store decides a lease's end when it reads the record.  A record     *)
(* acting at or after its lease, on the store's clock, has lapsed: every   *)
(* read of it answers "in doubt" from then on, and no Complete may record  *)
(* an outcome.  "stale-read" reads the status alone: acting stays "in      *)
(* progress" however late.                                                 *)
(***************************************************************************)
Lapsed(s, a) ==
    /\ store[s][a].status = "acting"
    /\ StoreNow(s) >= store[s][a].lease
    /\ Flaw # "stale-read"

\* The replica that redeemed a is still working on it (waiting for the
\* acknowledgement, acting or about to Complete).
Overran(a) == \E c \in Clients : req[c].appr = a /\ req[c].phase \in {"waiting", "acting", "acted"}

(***************************************************************************)
(* A read of store s finds a's lease lapsed: the answer is "in doubt", and *)
(* that is a's outcome if none was decided before.  The store writes it    *)
(* (w: the memory store and Redis do) or does not (PostgreSQL reads it so  *)
(* every time); either way the lease check keeps a late Complete out.  If  *)
(* the replica that redeemed is still working, it overran its lease.       *)
(***************************************************************************)
Decay(s, a, w) ==
    /\ IF w THEN Put(s, a, [store[s][a] EXCEPT !.status = "doubt"]) ELSE UNCHANGED <<store, log>>
    /\ recorded' = IF recorded[a] = NoOutcome THEN [recorded EXCEPT ![a] = InDoubt] ELSE recorded
    /\ faults' = IF Overran(a) THEN [faults EXCEPT ![a] = @ \cup {"lease"}] ELSE faults

(***************************************************************************)
(* The replica records what its execution reported and replies to c:       *)
(* Ledger.Complete, a compare-and-set acting -> done or failed (with the   *)
(* execution's result), or acting -> in doubt for an unknown outcome,      *)
(* accepted only while the lease lasts on the store's clock.  A record     *)
(* whose lease has lapsed is in doubt (Decay): the Complete fails and      *)
(* records nothing; the person still gets this call's own result.  Either  *)
(* way the request ends.  With the "blind-complete" flaw the outcome is    *)
(* written whatever the record holds; with "complete-no-lease" whenever it *)
(* is acting, lease or not.                                                *)
(***************************************************************************)
Complete(c) ==
    LET a   == req[c].appr
        s   == StoreOf(req[c].rep)
        rec == store[s][a]
        out == IF req[c].kind = "unknown" THEN InDoubt
               ELSE [kind |-> req[c].kind, exec |-> req[c].exec]
    IN /\ req[c].phase = "acted"
       /\ req' = [req EXCEPT ![c] = Idle]
       /\ IF \/ rec.status = "acting" /\ (StoreNow(s) < rec.lease \/ Flaw = "complete-no-lease")
             \/ Flaw = "blind-complete"
          THEN /\ Put(s, a, [rec EXCEPT !.status = out.kind, !.exec = out.exec])
               /\ recorded' = IF recorded[a] = NoOutcome THEN [recorded EXCEPT ![a] = out] ELSE recorded
               /\ UNCHANGED faults
          ELSE IF Lapsed(s, a)
               THEN \E w \in DoubtWrites : Decay(s, a, w)
               \* Refused: the lease ended before (the record in doubt, or
               \* forgotten since): this replica overran it.
               ELSE /\ UNCHANGED <<store, log, recorded>>
                    /\ faults' = [faults EXCEPT ![a] = @ \cup {"lease"}]
       /\ UNCHANGED <<clockVars, deployment, envelope, replicaVars, answer, effects, cancelled, spentAt,
                      replies, decisions, tellVars>>

(***************************************************************************)
(* The replica that holds a's lease renews it before it ends: a            *)
(* compare-and-set on the acting record, LeaseUntil = StoreNow + Lease,    *)
(* but never past the Redeem's time plus MaxLease, so that "in progress"   *)
(* ends.  (The Go ledger offers no renewal: MaxLease = Lease disables it.) *)
(* "unbounded-renewal" has no such cap.                                    *)
(***************************************************************************)
Renew(c) ==
    LET a   == req[c].appr
        s   == StoreOf(req[c].rep)
        rec == store[s][a]
        to  == IF Flaw = "unbounded-renewal" THEN StoreNow(s) + Lease
               ELSE Min(StoreNow(s) + Lease, rec.since + MaxLease)
    IN /\ req[c].phase \in {"acting", "acted"}
       /\ rec.status = "acting"
       /\ StoreNow(s) < rec.lease
       /\ to > rec.lease
       /\ Put(s, a, [rec EXCEPT !.lease = to])
       /\ UNCHANGED <<clockVars, deployment, envelope, replicaVars, answer, req, effects, cancelled, spentAt,
                      recorded, replies, faults, decisions, tellVars>>

(***************************************************************************)
(* Replica r receives c's retry of a with "accept", and its Redeem finds   *)
(* an outcome, or a lease that has lapsed (Decay): the retry is answered   *)
(* from the record -- the result of the one execution, or "in doubt" --    *)
(* and nothing runs.  replies[a] records the answer.  With the             *)
(* "replay-reruns" flaw a retry of a done or failed approval is answered   *)
(* by running the action again.                                            *)
(***************************************************************************)
Replay(c, r, a) ==
    LET s == StoreOf(r)
        rec == store[s][a]
    IN /\ Admitted(c, r, a, "accept")
       /\ \/ /\ rec.status \in Final
             /\ IF Flaw = "replay-reruns" /\ rec.status \in {"done", "failed"}
                THEN \E k \in Kinds :
                        /\ effects' = [effects EXCEPT ![a] = Append(@, [client |-> c, at |-> StoreNow(s), kind |-> k])]
                        /\ replies' = [replies EXCEPT ![a] = @ \cup
                                         {IF k = "unknown" THEN InDoubt
                                          ELSE [kind |-> k, exec |-> Len(effects[a]) + 1]}]
                ELSE /\ replies' = [replies EXCEPT ![a] = @ \cup {OutcomeOf(rec)}]
                     /\ UNCHANGED effects
             /\ UNCHANGED <<store, log, recorded, faults>>
          \/ /\ Lapsed(s, a)
             /\ \E w \in DoubtWrites : Decay(s, a, w)
             /\ replies' = [replies EXCEPT ![a] = @ \cup {InDoubt}]
             /\ UNCHANGED effects
       /\ Answered(c, a, "accept")
       /\ UNCHANGED <<clockVars, deployment, envelope, replicaVars, req, cancelled, spentAt, decisions, tellVars>>

(***************************************************************************)
(* Replica r receives c's retry of a with "accept", and its Redeem finds a *)
(* acting, its lease not ended on the store's clock: "in progress", and    *)
(* nothing changes -- except that an answer HoldBound or more after the    *)
(* Redeem is noted (lateProgress), which InProgressBounded forbids.        *)
(***************************************************************************)
InProgress(c, r, a) ==
    LET s == StoreOf(r) IN
    /\ Admitted(c, r, a, "accept")
    /\ store[s][a].status = "acting"
    /\ StoreNow(s) < store[s][a].lease \/ Flaw = "stale-read"
    /\ lateProgress' = [lateProgress EXCEPT ![a] = @ \/ (spent[a] /\ now >= spentAt[a] + HoldBound)]
    /\ UNCHANGED <<clockVars, deployment, envelope, store, log, replicaVars, answer, req, effects,
                   cancelled, spentAt, recorded, replies, faults, decisions, expiredTold>>

(***************************************************************************)
(* Replica r's boundary admits c's retry of a (unexpired on r's clock),    *)
(* and the store finds it pending but expired on its own clock: the retry  *)
(* is told it expired (expiredTold), and nothing changes.                  *)
(***************************************************************************)
TellExpired(c, r, a) ==
    LET s == StoreOf(r) IN
    /\ Admitted(c, r, a, "accept")
    /\ store[s][a].status = "pending"
    /\ ~Unexpired(s, a)
    /\ ~expiredTold[a]
    /\ expiredTold' = [expiredTold EXCEPT ![a] = TRUE]
    /\ UNCHANGED <<clockVars, deployment, envelope, store, log, replicaVars, answer, req, effects,
                   cancelled, spentAt, recorded, replies, faults, decisions, lateProgress>>

(***************************************************************************)
(* Replica r receives c's retry of a with "decline" and calls              *)
(* Ledger.Cancel: one atomic compare-and-set pending -> cancelled.  The    *)
(* reply is immediate -- on a shared store with a standby, once the write  *)
(* is acknowledged (Acked); nothing is deleted.                            *)
(***************************************************************************)
Cancel(c, r, a) ==
    LET s == StoreOf(r) IN
    /\ Admitted(c, r, a, "decline")
    /\ Redeemable(s, a)
    /\ Put(s, a, [store[s][a] EXCEPT !.status = "cancelled"])
    /\ IF Waits(s)
       THEN /\ req' = [req EXCEPT ![c] = [Idle EXCEPT !.phase = "cancelling", !.appr = a, !.rep = r,
                                                      !.pos = Len(log) + 1]]
            /\ UNCHANGED cancelled
       ELSE /\ cancelled' = [cancelled EXCEPT ![a] = TRUE]
            /\ UNCHANGED req
    /\ Answered(c, a, "decline")
    /\ UNCHANGED <<clockVars, deployment, envelope, replicaVars, effects, spentAt, recorded, replies, faults,
                   decisions, tellVars>>

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
       /\ Unexpired(s, a)
       /\ p \in Authorized \/ Flaw = "unlisted-approver"
       /\ p # rec.requester \/ Flaw = "self-approval"
       /\ (rec.dec[p] = "none" /\ ~Decided(rec)) \/ Flaw = "decide-twice"
       /\ Put(s, a, [rec EXCEPT !.dec[p] = IF yes THEN "approve" ELSE "decline",
                                !.status = IF yes THEN "pending" ELSE "cancelled"])
       /\ cancelled' = IF yes THEN cancelled ELSE [cancelled EXCEPT ![a] = TRUE]
       /\ decisions' = [decisions EXCEPT ![a] = Append(@, [who |-> p, yes |-> yes])]
       /\ UNCHANGED <<clockVars, deployment, envelope, replicaVars, answer, req, effects, spentAt, recorded,
                      replies, faults, tellVars>>

(***************************************************************************)
(* Store s forgets a once max(expiry, lease) + Grace has passed on its     *)
(* clock: pending records, outcomes and cancelled tombstones alike.  A     *)
(* replay after this gets ErrUnknown from the store -- but its sealed      *)
(* state, with the same expiry, is refused by the boundary first (clocks   *)
(* in step), so every retry the boundary admits is answered from the       *)
(* record.                                                                 *)
(***************************************************************************)
Forget(s, a) ==
    /\ store[s][a].status # "absent"
    /\ StoreNow(s) >= Max(store[s][a].exp, store[s][a].lease) + Grace
    /\ Put(s, a, Absent)
    /\ UNCHANGED <<clockVars, deployment, envelope, replicaVars, answer, req, effects, cancelled, spentAt,
                   recorded, replies, faults, decisions, tellVars>>

(***************************************************************************)
(* Replica r crashes and restarts.  Every request it was handling is       *)
(* dropped (its clients see a broken connection and may retry); an effect  *)
(* or an outcome it owed after a successful Redeem is never reported, and  *)
(* the record stays acting until a read finds its lease ended.  In the     *)
(* "memory" deployment its store comes back empty; a shared store is       *)
(* untouched.                                                              *)
(***************************************************************************)
Restart(r) ==
    /\ store' = IF deployment = "memory"
                   THEN [store EXCEPT ![r] = [a \in Approvals |-> Absent]]
                   ELSE store
    /\ req' = [c \in Clients |-> IF req[c].rep = r THEN Idle ELSE req[c]]
    /\ faults' = [a \in Approvals |->
                    IF \E c \in Clients : /\ req[c].rep = r
                                          /\ req[c].phase \in {"waiting", "acting", "acted"}
                                          /\ req[c].appr = a
                    THEN faults[a] \cup {"crash"} ELSE faults[a]]
    /\ UNCHANGED <<clockVars, deployment, envelope, log, replicaVars, answer, effects, cancelled, spentAt,
                   recorded, replies, decisions, tellVars>>

(***************************************************************************)
(* Real time moves on to t.  The clocks move with it, except that the      *)
(* clock of a store in still stands still meanwhile (drifts back by up to  *)
(* MaxSkew): what a store sees after its clock was stepped back when it    *)
(* never decides on a time before one it already used.  No record changes: *)
(* the stores decide leases' ends when they read them (Lapsed).            *)
(***************************************************************************)
PassTime(t, still) ==
    /\ now' = t
    /\ soff' = [s \in Stores |-> IF s \in still THEN Max(soff[s] - (t - now), -MaxSkew) ELSE soff[s]]
    /\ UNCHANGED rskew

(* Time passes. *)
Tick ==
    /\ \E still \in IF MaxSkew = 0 THEN {{}} ELSE SUBSET UsedStores : PassTime(now + 1, still)
    /\ UNCHANGED <<deployment, envelope, store, log, replicaVars, answer, req, effects, cancelled, spentAt,
                   recorded, replies, faults, decisions, tellVars>>

(***************************************************************************)
(* Store s's clock steps to real time plus d (NTP, an operator, a standby  *)
(* promoted with another clock).  The store guards against a step back: it *)
(* never decides on a time before one it already used, so only a step      *)
(* forward is seen (a step back is seen as the clock standing still:       *)
(* PassTime).  "clock-unguarded" decides on the clock as it is.            *)
(***************************************************************************)
StepClock(s, d) ==
    /\ s \in UsedStores
    /\ d > soff[s] \/ (Flaw = "clock-unguarded" /\ d # soff[s])
    /\ soff' = [soff EXCEPT ![s] = d]
    /\ UNCHANGED <<now, rskew, deployment, envelope, store, log, replicaVars, answer, req, effects, cancelled,
                   spentAt, recorded, replies, faults, decisions, tellVars>>

Next ==
    \/ \E r \in Replicas, a \in Approvals, n \in Quorums, q \in Approvers \cup {None} : Issue(r, a, n, q)
    \/ \E p \in Approvers, r \in Replicas, a \in Approvals, yes \in BOOLEAN : Decide(p, r, a, yes)
    \/ \E c \in Clients, r \in Replicas, a \in Approvals :
          \/ Redeem(c, r, a) \/ RedeemCheck(c, r, a) \/ Replay(c, r, a) \/ Cancel(c, r, a)
          \/ InProgress(c, r, a) \/ TellExpired(c, r, a)
    \/ \E c \in Clients : RedeemAct(c) \/ DoEffect(c) \/ Complete(c) \/ Renew(c) \/ Acked(c) \/ GiveUp(c)
    \/ \E s \in Stores, a \in Approvals : Forget(s, a)
    \/ \E r \in Replicas : Restart(r)
    \/ Apply \/ Failover
    \/ \E s \in Stores, d \in Skews : StepClock(s, d)
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

\* Every execution was authorized by a Redeem strictly before the approval's
\* expiry, on the clock of the store that decided it.  (The deletion itself
\* may run later if the replica is slow: it is not re-timed.)
NoEffectAfterExpiry ==
    \A a \in Approvals : \A i \in 1..Len(effects[a]) :
        effects[a][i].at < envelope[a].exp

\* Once a decline was recorded, a never takes effect (and, conversely, an approval
\* that took effect can no longer be cancelled).
NoEffectAfterDecline == \A a \in Approvals : cancelled[a] => effects[a] = <<>>

\* An approval some retry was told had expired is never redeemed afterwards
\* (nor before: a redeemed approval is answered from its record).
ExpiredStaysExpired == \A a \in Approvals : expiredTold[a] => ~spent[a]

\* Every copy of a's record: each store's, and the shared primary's standby's.
Copies(a) == {store[s][a] : s \in Stores} \cup {standby[a]}

\* A spent approval stays spent: no store (nor standby) ever holds it as
\* pending (or cancelled) again, so no later Redeem can succeed.
\* Forgetting it is fine: ErrUnknown refuses.
SpentStaysSpent ==
    \A a \in Approvals : spent[a] => \A rec \in Copies(a) : rec.status \in Redeemed \cup {"absent"}

\* Every answer to a retry of a done (failed, in doubt) approval is the one
\* recorded outcome: the first outcome any store recorded or decided for
\* it.  So every retry of one approval gets the same answer, and never a
\* second execution's -- except once a write of a went unacknowledged (a
\* failover lost it, or its replica gave up on it): what a retry read on
\* the primary may be gone, so one retry may be told "in doubt" and another
\* the outcome, or the reverse.  Never two outcomes: there is one execution
\* (AtMostOnce), and every done or failed names it (NoOutcomeWithoutEffect).
ReplayEqualsRecord ==
    \A a \in Approvals : \A o \in replies[a] :
        \/ o = recorded[a]
        \/ "unacked" \in faults[a] /\ InDoubt \in {o, recorded[a]}

\* What any store or answer says about a.
Outcomes(a) == {recorded[a]} \cup replies[a] \cup {OutcomeOf(rec) : rec \in Copies(a)}

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
        /\ \A rec \in Copies(a) : rec.status \notin {"pending", "cancelled"}

\* Nothing is ever said to be in doubt unless the replica that redeemed it
\* crashed before Complete, overran its lease, reported an unknown outcome,
\* or a write of it went unacknowledged.
DoubtOnlyAfterCrashOrLease ==
    \A a \in Approvals : (\E o \in Outcomes(a) : o.kind = "doubt") => faults[a] # {}

\* "In progress" ends: no retry is told so HoldBound (real time) or more
\* after the Redeem succeeded.  Later, the store says "in doubt".
InProgressBounded == \A a \in Approvals : ~lateProgress[a]

\* Redeemed records only move forward -- acting to done, failed or in doubt --
\* and an outcome, once recorded, never changes; any record may be forgotten.
\* So for the standby's copy, always; for the primary's, except in a
\* failover, which leaves only what the standby had applied.
MovesForward(old, new) ==
    /\ old.status = "acting" => new.status \in Redeemed \cup {"absent"}
    /\ old.status \in Final => new \in {old, Absent}

SpentIsFinal ==
    [][/\ promoted' = promoted => \A s \in Stores, a \in Approvals : MovesForward(store[s][a], store'[s][a])
       /\ \A a \in Approvals : MovesForward(standby[a], standby'[a])]_vars

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
    /\ ExpiredStaysExpired
    /\ SpentStaysSpent
    /\ ReplayEqualsRecord
    /\ NoOutcomeWithoutEffect
    /\ NoEffectReportedNotDone
    /\ DoubtOnlyAfterCrashOrLease
    /\ InProgressBounded
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
