---------------------------- MODULE TraceLedger ----------------------------
(***************************************************************************)
(* Trace validation: is a log of the Go ledger (impl/ledger) a behaviour   *)
(* of Ledger?                                                              *)
(*                                                                         *)
(* Trace is the log, one record per event, in the order the events were    *)
(* observed:                                                               *)
(*   [t |-> clock in ticks, action |-> "Issue" | "Redeem" | "Cancel" |     *)
(*    "Restart", id |-> approval id ("" for Restart), replica |-> replica, *)
(*    result |-> "ok" | "unknown" | "spent" | "cancelled" | "expired" |    *)
(*    "full"]                                                              *)
(* The Go test in spec/trace writes it, with the constants, into a module  *)
(* MCTraceLedger that extends this one; no community modules are needed.   *)
(*                                                                         *)
(* The log shows only what the ledger sees.  What it cannot see -- the     *)
(* human's answers, the effects, the store forgetting old records, time    *)
(* passing between events -- are silent steps that TLC interleaves (see    *)
(* Silent).  Every event must then be matched by one step of Ledger:       *)
(*  - Issue ok, Redeem ok, Cancel ok, Restart: the action of that name, on *)
(*    the event's replica, at the event's time.  The client of Ledger is   *)
(*    named after the approval (Clients = Approvals): the ledger does not  *)
(*    see clients, and one per approval is all a log needs, since at most  *)
(*    one Redeem of an approval succeeds; naming it keeps the search from  *)
(*    branching on which client it was;                                    *)
(*  - a refused Redeem or Cancel: a stuttering step, allowed only if the   *)
(*    replica's store gives exactly that answer in the current state (see  *)
(*    StoreAnswer);                                                        *)
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
\* the order impl/ledger's Memory.Spend checks: unknown, expired, spent
\* (redeemed: acting, done, failed or in doubt), cancelled.
StoreAnswer(s, a) ==
    LET rec == store[s][a] IN
    CASE rec.status = "absent"     -> "unknown"
      [] now >= rec.exp            -> "expired"
      [] rec.status \in Redeemed   -> "spent"
      [] rec.status = "cancelled"  -> "cancelled"
      [] OTHER                     -> "ok"

TraceInit == Init /\ i = 1

(***************************************************************************)
(* Steps the log cannot show, taken just in time: a record is forgotten    *)
(* only right before an event that finds it unknown, and only in the store *)
(* that answers that event; time passes only to the next event's time.     *)
(* Taken earlier, or in another store, a forget would change nothing       *)
(* observable (it commutes with every event about other approvals), so no  *)
(* trace is rejected for it, and the search stays linear in the length of  *)
(* the trace instead of exponential in the number of approvals: a forget   *)
(* left optional in a store that no later event asks would double the      *)
(* states for the rest of the trace.  The human's answer is part of the    *)
(* Redeem or Cancel that carries it (Ledger's Admitted).                   *)
(***************************************************************************)
Silent ==
    /\ i <= Len(Trace)
    /\ \/ /\ ev.result = "unknown"
          /\ Forget(StoreOf(ev.replica), ev.id)
       \/ /\ now < ev.t
          /\ PassTime(ev.t)
          /\ UNCHANGED <<deployment, envelope, answer, req, effects, cancelled, spent, replies>>

(* The step of Ledger that produced event ev. *)
Matches ==
    \/ ev.action = "Issue" /\ ev.result = "ok" /\ Issue(ev.replica, ev.id)
    \/ ev.action = "Issue" /\ ev.result = "full" /\ UNCHANGED vars
    \/ ev.action = "Redeem" /\ ev.result = "ok" /\ Redeem(ev.id, ev.replica, ev.id)
    \/ ev.action = "Cancel" /\ ev.result = "ok" /\ Cancel(ev.id, ev.replica, ev.id)
    \/ /\ ev.action \in {"Redeem", "Cancel"}
       /\ ev.result \in {"unknown", "expired", "spent", "cancelled"}
       /\ StoreAnswer(StoreOf(ev.replica), ev.id) = ev.result
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
