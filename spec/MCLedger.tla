------------------------------ MODULE MCLedger ------------------------------
(***************************************************************************)
(* TLC-only definitions for checking Ledger: a bound on the clock, the     *)
(* symmetry of the model-value sets, and the two definitions the controls  *)
(* use.  Every Ledger*.cfg beside this file instantiates this module; the  *)
(* line "TLC-EXPECT: <exit code> <line>" in each one says what TLC must    *)
(* report for it (see tlc.sh).                                             *)
(***************************************************************************)
EXTENDS Ledger, TLC

CONSTANT MaxTime  \* the last clock value explored

\* State constraint: explore the clock up to MaxTime only.
ClockBound == now <= MaxTime

\* Replicas, clients and approvals are interchangeable.  (Shared and None are
\* distinguished model values and stay fixed.)  Sound for safety only.
Symmetry == Permutations(Replicas) \cup Permutations(Clients) \cup Permutations(Approvals)

\* Control for "at most once, not exactly once": claims that no effect is ever
\* lost.  TLC must refute it with a crash between Redeem and DoEffect.
EffectNeverLost == \A a \in Approvals : ~lost[a]

\* Control for the liveness check: without fairness a replica may hold a
\* redeemed request forever, so RedeemLeadsToEffect must fail.
UnfairSpec == Init /\ [][Next]_vars
=============================================================================
