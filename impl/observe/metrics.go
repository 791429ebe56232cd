package observe

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/mcp-confirm/mcp-confirm/impl/ledger"
	"github.com/mcp-confirm/mcp-confirm/impl/requeststate"
)

// metrics are the collectors of one Telemetry, every labelled child made
// up front: a count on the hot path is one atomic add, never a label
// lookup or a new series.
type metrics struct {
	questions   prometheus.Counter
	capRefusals prometheus.Counter
	redemptions prometheus.Counter
	inDoubt     prometheus.Counter
	approvals   [2]prometheus.Counter // by via
	declines    [2]prometheus.Counter // by via
	replays     map[ledger.Result]prometheus.Counter
	expiries    [2]prometheus.Counter // by layer
	refusals    map[requeststate.Refusal]prometheus.Counter
	decision    [2]prometheus.Observer // by answer: approve, decline
	action      [4]prometheus.Observer // by ledger.OutcomeKind (1..3)
	ledgerOp    [numOps]prometheus.Observer
}

// Values of the via label: who gave an approval or a decline.
const (
	viaInBand   = 0 // the person's answer, relayed by the client
	viaApprover = 1 // an approver, out of band (ledger.Decide)
)

// Values of the layer label of expiries.
const (
	layerBoundary = 0
	layerLedger   = 1
)

// Values of the answer label of decision_seconds.
const (
	answerApprove = 0
	answerDecline = 1
)

// Store operations timed in mcp_confirm_ledger_seconds, by their
// ledger.Store method.
const (
	opAdd = iota
	opSpend
	opComplete
	opDecide
	opLookup
	opPending
	numOps
)

var opNames = [numOps]string{"add", "spend", "complete", "decide", "lookup", "pending"}

// Buckets, in seconds.
var (
	// decisionBuckets span a person's answer: seconds to the default TTL
	// (10 minutes) and beyond.
	decisionBuckets = []float64{0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300, 600, 1800}
	// actionBuckets span an action: a local deletion to a slow upstream
	// call within the default lease (2 minutes).
	actionBuckets = []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120}
	// ledgerBuckets span a store operation: the memory store's
	// microseconds to a network store's milliseconds, and a stall.
	ledgerBuckets = []float64{0.00001, 0.000025, 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1}
)

func newMetrics(reg prometheus.Registerer, store string) *metrics {
	counter := func(name, help string) prometheus.Counter {
		c := prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help})
		reg.MustRegister(c)
		return c
	}
	counterVec := func(name, help, label string) *prometheus.CounterVec {
		c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, []string{label})
		reg.MustRegister(c)
		return c
	}
	m := &metrics{
		questions:   counter("mcp_confirm_questions_total", "Questions asked: confirmations issued to the ledger and put to the person."),
		capRefusals: counter("mcp_confirm_cap_refusals_total", "Questions refused because a cap on pending confirmations was reached; nothing was issued."),
		redemptions: counter("mcp_confirm_redemptions_total", "Approvals redeemed: the ledger spent the confirmation and the action ran, once."),
		inDoubt:     counter("mcp_confirm_in_doubt_total", "Approved actions left in doubt: their outcome was unknown, or could not be recorded within the lease."),
		replays:     map[ledger.Result]prometheus.Counter{},
		refusals:    map[requeststate.Refusal]prometheus.Counter{},
	}
	approvals := counterVec("mcp_confirm_approvals_total", "Approvals given: explicit yes answers relayed by the client (via=in_band), approvers' approvals (via=approver).", "via")
	declines := counterVec("mcp_confirm_declines_total", "Declines: answers other than an explicit yes (via=in_band), approvers' declines (via=approver).", "via")
	for i, via := range []string{"in_band", "approver"} {
		m.approvals[i] = approvals.WithLabelValues(via)
		m.declines[i] = declines.WithLabelValues(via)
	}
	replays := counterVec("mcp_confirm_replays_total", "Retries of an approval already redeemed, answered from the ledger's record without acting, by the state they found.", "state")
	for _, r := range []ledger.Result{ledger.ResultInProgress, ledger.ResultDone, ledger.ResultInDoubt} {
		m.replays[r] = replays.WithLabelValues(string(r))
	}
	expiries := counterVec("mcp_confirm_expiries_total", "Answers that came after their question had expired, refused by the boundary (its sealed state expired) or the ledger.", "layer")
	for i, layer := range []string{"boundary", "ledger"} {
		m.expiries[i] = expiries.WithLabelValues(layer)
	}
	refusals := counterVec("mcp_confirm_boundary_refusals_total", "Calls the requestState boundary refused, by the class of its reason.", "class")
	for _, c := range requeststate.Refusals {
		m.refusals[c] = refusals.WithLabelValues(string(c))
	}
	decision := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "mcp_confirm_decision_seconds",
		Help:    "Time from a question being asked to the answer that spent it: an approval redeemed, or a decline.",
		Buckets: decisionBuckets,
	}, []string{"answer"})
	reg.MustRegister(decision)
	m.decision[answerApprove] = decision.WithLabelValues("approve")
	m.decision[answerDecline] = decision.WithLabelValues("decline")
	action := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "mcp_confirm_action_seconds",
		Help:    "How long approved actions took, by outcome: done, failed or unknown.",
		Buckets: actionBuckets,
	}, []string{"outcome"})
	reg.MustRegister(action)
	for _, k := range []ledger.OutcomeKind{ledger.OutcomeDone, ledger.OutcomeFailed, ledger.OutcomeUnknown} {
		m.action[k] = action.WithLabelValues(k.String())
	}
	op := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "mcp_confirm_ledger_seconds",
		Help:    "Latency of the ledger's store operations, by store (memory, redis, postgres) and operation.",
		Buckets: ledgerBuckets,
	}, []string{"store", "op"})
	reg.MustRegister(op)
	for i, name := range opNames {
		m.ledgerOp[i] = op.WithLabelValues(store, name)
	}
	return m
}
