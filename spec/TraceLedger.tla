---------------------------- MODULE TraceLedger ----------------------------
(***************************************************************************)
(* Trace validation: is a log of the Go ledger (impl/ledger) a behaviour   *)
(* of Ledger?                                                              *)
(*                                                                         *)
(* Trace is the log, one record per event, in the order the events were    *)
(* observed:                                                               *)
(*   [t |-> clock in ticks,                                                *)
(*    action |-> "Issue" | "Redeem" | "Cancel" | "Complete" | "Decide" |   *)
(*               "Restart",                                                *)
(*    id |-> approval id ("" for Restart), replica |-> replica,            *)
(*    result |-> "ok" | "unknown" | "in_progress" | "done" | "in_doubt" |  *)
(*               "cancelled" | "expired" | "not_acting" | "full" |         *)
(*               "awaiting_approval" | "declined" | "decided" |            *)
(*               "self_approval" | "not_approver" | "in_band",             *)
(*    outcome |-> "done" | "failed" | "unknown" | "",                      *)
(*    need |-> approvals an Issue's confirmation needs (0: in band),       *)
(*    requester |-> its requester ("" for none),                           *)
(*    approver |-> who Decides ("" otherwise), approve |-> BOOLEAN]        *)
(* outcome is, for a Complete, the kind it tried to record; for a Redeem   *)
(* or Cancel answered "done", the kind of the recorded outcome it gave     *)
(* back; "" otherwise.  The Go test in spec/trace writes the log, with the *)
(* constants, into a module MCTraceLedger that extends this one; no        *)
(* community modules are needed.                                           *)
(*                                                                         *)
(* The log shows only what the ledger sees.  What it cannot see -- the     *)
(* effects, the store forgetting old records, time passing between events  *)
(* -- are silent steps that TLC interleaves                                *)
(* (see Silent).  Every event must then be matched by one step of Ledger:  *)
(*  - Issue ok, Redeem ok, Cancel ok, Complete ok, Restart: the action of  *)
(*    that name, on the event's replica, at the event's time; a Complete   *)
(*    ok must come from the replica that redeemed the approval and record  *)
(*    the kind its execution reported.  The client of Ledger is named      *)
(*    after the approval (Clients = Approvals): the ledger does not see    *)
(*    clients, and one per approval is all a log needs, since at most one  *)
(*    Redeem of an approval succeeds; naming it keeps the search from      *)
(*    branching on which client it was.  The human's answer travels with   *)
(*    the Redeem or Cancel (Ledger's Admitted);                            *)
(*  - Decide ok: the action Decide of that approver, on the replica's      *)
(*    store;                                                               *)
(*  - a refused Redeem, Cancel, Complete or Decide: a stuttering step,     *)
(*    allowed only if the replica's store gives exactly that answer in the *)
(*    current state (SpendAnswer, CompleteAnswer, DecideAnswer) and, for   *)
(*    "done", holds exactly the outcome the event reports -- unless the    *)
(*    store found a lease lapsed, which it decides then: "in doubt"        *)
(*    (RefusedStep);                                                       *)
(*  - Issue full: a stuttering step (caps are not modelled).               *)
(*                                                                         *)
(* The trace is accepted iff some behaviour matches every event.  TLC      *)
(* shows that by violating TraceIncomplete (an invariant that says "not    *)
(* all events matched yet"): "Invariant TraceIncomplete is violated" means *)
(* ACCEPTED, with the matching behaviour as the trace; "No error has been  *)
(* found" means REJECTED.                                                  *)
(***************************************************************************)
EXTENDS Ledger

CONSTANT Trace  \* the log, a sequence of event records as above

VARIABLE i      \* the index of the next event to match

traceVars == <<vars, i>>

\* The next event.
ev == Trace[i]

\* What store s answers to a Redeem (redeem TRUE) or Cancel of a in the
\* current state, in the order impl/ledger's Memory.Spend decides: unknown;
\* a record that is no longer pending answers from its state, whatever its
\* expiry (one an approver declined: declined); a pending one is expired,
\* or for a Redeem awaiting approval until the approvals are in, or, if
\* the compare-and-set may go ahead, ok.  An acting record whose lease
\* has ended on the store's clock is in doubt (Lapsed).
SpendAnswer(s, a, redeem) ==
    LET rec == store[s][a] IN
    CASE rec.status = "absent"                -> "unknown"
      [] rec.status = "cancelled" /\ DeclinersOf(rec) # {} -> "declined"
      [] rec.status = "cancelled"             -> "cancelled"
      [] Lapsed(s, a)                         -> "in_doubt"
      [] rec.status = "acting"                -> "in_progress"
      [] rec.status \in {"done", "failed"}    -> "done"
      [] rec.status = "doubt"                 -> "in_doubt"
      [] ~Unexpired(s, a)                     -> "expired"
      [] redeem /\ ~Approved(rec)             -> "awaiting_approval"
      [] OTHER                                -> "ok"

\* What store s answers to a Complete of a, in the order Memory.Complete
\* decides: a pending record is expired or not acting; an acting one whose
\* lease has not ended takes the outcome; any other answers as to a Spend.
CompleteAnswer(s, a) ==
    LET rec == store[s][a] IN
    CASE rec.status = "pending" /\ ~Unexpired(s, a) -> "expired"
      [] rec.status = "pending"                     -> "not_acting"
      [] rec.status = "acting" /\ ~Lapsed(s, a)     -> "ok"
      [] OTHER                                    -> SpendAnswer(s, a, FALSE)

\* What store s answers to approver p's Decide of a, in the order
\* ledger.Record.Decide decides: unknown; in band; the requester; not
\* authorized; decided (p decided, the outcome is decided, or it was
\* redeemed); withdrawn by the client; expired; else ok.
DecideAnswer(s, a, p) ==
    LET rec == store[s][a] IN
    CASE rec.status = "absent"                    -> "unknown"
      [] rec.need = 0                             -> "in_band"
      [] p = rec.requester                        -> "self_approval"
      [] p \notin Authorized                      -> "not_approver"
      [] rec.dec[p] # "none" \/ Decided(rec) \/ rec.status \in Redeemed -> "decided"
      [] rec.status = "cancelled"                 -> "cancelled"
      [] ~Unexpired(s, a)                         -> "expired"
      [] OTHER                                    -> "ok"

\* A refused operation's answer, as store s gives it for a in this state.
Refused(s, a) ==
    /\ ev.result = CASE ev.action = "Complete" -> CompleteAnswer(s, a)
                    [] ev.action = "Decide"   -> DecideAnswer(s, a, ev.approver)
                    [] OTHER                  -> SpendAnswer(s, a, ev.action = "Redeem")
    /\ ev.result # "ok"
    \* An answer "done" gives back the recorded outcome: it must be this one.
    /\ (ev.result = "done" /\ ev.action # "Complete") => ev.outcome = store[s][a].status

(***************************************************************************)
(* The step of a refused operation that store s answered about a: none,    *)
(* unless the store found a's lease lapsed, which it decides then (Decay): *)
(* in doubt, written or not as the store does (DoubtWrites).               *)
(***************************************************************************)
RefusedStep(s, a) ==
    IF Lapsed(s, a)
    THEN /\ \E w \in DoubtWrites : Decay(s, a, w)
         /\ UNCHANGED <<clockVars, deployment, envelope, replicaVars, answer, req, effects, cancelled,
                        spentAt, replies, decisions, tellVars>>
    ELSE UNCHANGED vars

TraceInit == Init /\ i = 1

(***************************************************************************)
(* Steps the log cannot show, taken just in time: the execution that a     *)
(* Complete ok records runs right before it, and reports what the event    *)
(* records; a record is forgotten only right before an event that finds it *)
(* unknown, and only in the store that answers that event; time passes     *)
(* only to the next event's time (the stores decide leases' ends when they *)
(* read the records, and the clocks keep in step: MaxSkew = 0).  Taken     *)
(* earlier, or in another store, a forget would change nothing observable  *)
(* (it commutes with every event about other approvals), so no trace is    *)
(* rejected for it, and the search stays linear in the length of the       *)
(* trace instead of exponential in the number of approvals: a forget left  *)
(* optional in a store that no later event asks would double the states    *)
(* for the rest of the trace.                                              *)
(***************************************************************************)
Silent ==
    /\ i <= Len(Trace)
    /\ \/ /\ ev.action = "Complete" /\ ev.result = "ok"
          /\ DoEffect(ev.id)
          /\ req'[ev.id].kind = ev.outcome
       \/ /\ ev.result = "unknown"
          /\ Forget(StoreOf(ev.replica), ev.id)
       \/ /\ now < ev.t
          /\ PassTime(ev.t, {})
          /\ UNCHANGED <<deployment, envelope, store, log, replicaVars, answer, req, effects, cancelled,
                         spentAt, recorded, replies, faults, decisions, tellVars>>

(* The step of Ledger that produced event ev. *)
Matches ==
    \/ /\ ev.action = "Issue" /\ ev.result = "ok"
       /\ Issue(ev.replica, ev.id, ev.need, IF ev.requester = "" THEN None ELSE ev.requester)
    \/ ev.action = "Issue" /\ ev.result = "full" /\ UNCHANGED vars
    \/ ev.action = "Redeem" /\ ev.result = "ok" /\ Redeem(ev.id, ev.replica, ev.id)
    \/ ev.action = "Cancel" /\ ev.result = "ok" /\ Cancel(ev.id, ev.replica, ev.id)
    \/ ev.action = "Decide" /\ ev.result = "ok" /\ Decide(ev.approver, ev.replica, ev.id, ev.approve)
    \/ /\ ev.action = "Complete" /\ ev.result = "ok"
       /\ req[ev.id].rep = ev.replica
       /\ CompleteAnswer(StoreOf(ev.replica), ev.id) = "ok"
       /\ Complete(ev.id)
    \/ /\ ev.action \in {"Redeem", "Cancel", "Complete", "Decide"}
       /\ Refused(StoreOf(ev.replica), ev.id)
       /\ RefusedStep(StoreOf(ev.replica), ev.id)
    \/ ev.action = "Restart" /\ Restart(ev.replica)

TraceNext ==
    \/ /\ i <= Len(Trace)
       /\ now = ev.t
       /\ Matches
       /\ i' = i + 1
    \/ Silent /\ UNCHANGED i

TraceSpec == TraceInit /\ [][TraceNext]_traceVars

\* Violated exactly when the whole trace has been matched (see above).
TraceIncomplete == i <= Len(Trace)
=============================================================================
