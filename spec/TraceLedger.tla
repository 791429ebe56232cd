---------------------------- MODULE TraceLedger ----------------------------
(***************************************************************************)
(* Trace validation: is a log of the Go ledger (impl/ledger) a behaviour   *)
(* of Ledger?                                                              *)
(*                                                                         *)
(* Trace is the log, one record per event, in the order the events were    *)
(* observed:                                                               *)
(*   [t |-> clock in ticks,                                                *)
(*    action |-> "Issue" | "Redeem" | "Cancel" | "Complete" | "Restart",   *)
(*    id |-> approval id ("" for Restart), replica |-> replica,            *)
(*    result |-> "ok" | "unknown" | "in_progress" | "done" | "in_doubt" |  *)
(*               "cancelled" | "expired" | "not_acting" | "full",          *)
(*    outcome |-> "done" | "failed" | "unknown" | ""]                      *)
(* outcome is, for a Complete, the kind it tried to record; for a Redeem   *)
(* or Cancel answered "done", the kind of the recorded outcome it gave     *)
(* back; "" otherwise.  The Go test in spec/trace writes the log, with the *)
(* constants, into a module MCTraceLedger that extends this one; no        *)
(* community modules are needed.                                           *)
(*                                                                         *)
(* The log shows only what the ledger sees.  What it cannot see -- the     *)
(* effects, the store forgetting old records, time passing between events  *)
(* (and with it leases ending) -- are silent steps that TLC interleaves    *)
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
(*  - a refused Redeem, Cancel or Complete: a stuttering step, allowed     *)
(*    only if the replica's store gives exactly that answer in the current *)
(*    state (SpendAnswer, CompleteAnswer) and, for "done", holds exactly   *)
(*    the outcome the event reports;                                       *)
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

\* What store s answers to a Redeem or Cancel of a in the current state, in
\* the order impl/ledger's Memory.Spend decides: unknown; a record that is
\* no longer pending answers from its state, whatever its expiry; a pending
\* one is expired or, if the compare-and-set may go ahead, ok.  (An acting
\* record whose lease has ended is in doubt already: PassTime.)
SpendAnswer(s, a) ==
    LET rec == store[s][a] IN
    CASE rec.status = "absent"                -> "unknown"
      [] rec.status = "cancelled"             -> "cancelled"
      [] rec.status = "acting"                -> "in_progress"
      [] rec.status \in {"done", "failed"}    -> "done"
      [] rec.status = "doubt"                 -> "in_doubt"
      [] now >= rec.exp                       -> "expired"
      [] OTHER                                -> "ok"

\* What store s answers to a Complete of a, in the order Memory.Complete
\* decides: a pending record is expired or not acting; an acting one (its
\* lease not ended) takes the outcome; any other answers as to a Spend.
CompleteAnswer(s, a) ==
    LET rec == store[s][a] IN
    CASE rec.status = "pending" /\ now >= rec.exp -> "expired"
      [] rec.status = "pending"                   -> "not_acting"
      [] rec.status = "acting"                    -> "ok"
      [] OTHER                                    -> SpendAnswer(s, a)

\* A refused operation's answer, as store s gives it for a in this state.
Refused(s, a) ==
    /\ ev.result = IF ev.action = "Complete" THEN CompleteAnswer(s, a) ELSE SpendAnswer(s, a)
    /\ ev.result # "ok"
    \* An answer "done" gives back the recorded outcome: it must be this one.
    /\ (ev.result = "done" /\ ev.action # "Complete") => ev.outcome = store[s][a].status

TraceInit == Init /\ i = 1

(***************************************************************************)
(* Steps the log cannot show, taken just in time: the execution that a     *)
(* Complete ok records runs right before it, and reports what the event    *)
(* records; a record is forgotten only right before an event that finds it *)
(* unknown, and only in the store that answers that event; time passes     *)
(* only to the next event's time, ending the leases due by then.  Taken    *)
(* earlier, or in another store, a forget would change nothing observable  *)
(* (it commutes with every event about other approvals), so no trace is    *)
(* rejected for it, and the search stays linear in the length of the      *)
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
          /\ PassTime(ev.t)
          /\ UNCHANGED <<deployment, envelope, answer, req, effects, cancelled, spent, replies, decisions>>

(* The step of Ledger that produced event ev. *)
Matches ==
    \/ ev.action = "Issue" /\ ev.result = "ok" /\ Issue(ev.replica, ev.id, 0, None)
    \/ ev.action = "Issue" /\ ev.result = "full" /\ UNCHANGED vars
    \/ ev.action = "Redeem" /\ ev.result = "ok" /\ Redeem(ev.id, ev.replica, ev.id)
    \/ ev.action = "Cancel" /\ ev.result = "ok" /\ Cancel(ev.id, ev.replica, ev.id)
    \/ /\ ev.action = "Complete" /\ ev.result = "ok"
       /\ req[ev.id].rep = ev.replica
       /\ CompleteAnswer(StoreOf(ev.replica), ev.id) = "ok"
       /\ Complete(ev.id)
    \/ /\ ev.action \in {"Redeem", "Cancel", "Complete"}
       /\ Refused(StoreOf(ev.replica), ev.id)
       /\ UNCHANGED vars
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
