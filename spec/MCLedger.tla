------------------------------ MODULE MCLedger ------------------------------
(***************************************************************************)
(* TLC-only definitions for checking Ledger: a bound on the clock, the     *)
(* symmetry of the model-value sets, and the definitions the controls use. *)
(* Every Ledger*.cfg beside this file instantiates this module; the line   *)
(* "TLC-EXPECT: <exit code> <line>" in each one says what TLC must report  *)
(* for it (see tlc.sh).                                                    *)
(***************************************************************************)
EXTENDS Ledger, TLC

CONSTANT MaxTime  \* the last clock value explored

\* State constraint: explore the clock up to MaxTime only.
ClockBound == now <= MaxTime

\* Replicas, clients and approvals are interchangeable, and so are the
\* authorized approvers among themselves and the others among themselves.
\* (Shared and None are distinguished model values and stay fixed.)  Sound
\* for safety only.
Symmetry == Permutations(Replicas) \cup Permutations(Clients) \cup Permutations(Approvals)
            \cup Permutations(Authorized) \cup Permutations(Approvers \ Authorized)

\* Control for "at most once, not exactly once": claims that a crash never
\* leaves a retry in doubt.  TLC must refute it with a replica crashing
\* after Redeem and a retry told "in doubt" -- while every safety invariant,
\* AtMostOnce included, still holds: a crash costs the answer, never a
\* second effect.
NoRetryInDoubtAfterCrash ==
    \A a \in Approvals : "crash" \in faults[a] => InDoubt \notin replies[a]

\* Control for the approval configurations: claims that no confirmation
\* needing out-of-band approval is ever redeemed.  TLC must refute it with
\* one approved by every approver it needs and then redeemed -- while every
\* safety invariant still holds -- so the approval invariants of
\* LedgerApprove.cfg and LedgerFourEyes.cfg are not vacuous.
NoOutOfBandRedeem == \A a \in Approvals : envelope[a].need > 0 => ~spent[a]

\* Controls for the liveness checks: without fairness a replica may hold a
\* redeemed request forever, so RedeemLeadsToEffect must fail; with DoEffect
\* fair but not Complete, it may act and never record the outcome, so
\* RedeemEndsDoneOrFailed must fail.
UnfairSpec == Init /\ [][Next]_vars
UnfairCompleteSpec == Init /\ [][Next]_vars /\ \A c \in Clients : WF_vars(DoEffect(c))
=============================================================================
