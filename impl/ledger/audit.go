package ledger

import (
	"context"

	"github.com/mcp-confirm/mcp-confirm/impl/audit"
)

// The audit records of the ledger's operations (package audit): what
// each store that keeps a trail writes, in the same atomic step as the
// transition, with the Result it decided (and Seq, Time and Prev). These
// return the caller-known part, the record's prefix: from the
// confirmation or the arguments, and from the [audit.Call] the front end
// put in ctx ([audit.WithCall]). Whether a call is recorded at all is
// [audit.Recorded]'s rule.

// AuditIssue is the record of an Add of c.
func AuditIssue(ctx context.Context, c Confirmation) audit.Record {
	call, _ := audit.FromContext(ctx)
	r := audit.Record{Op: audit.OpIssue, ID: c.ID.String(), Principal: c.Principal, Tool: c.Tool,
		ArgsDigest: c.ArgsDigest, Question: call.Question, Deadline: c.Expires.UnixMicro()}
	if r.Question == "" && c.Approval != nil {
		r.Question = c.Approval.Question
	}
	return r
}

// AuditSpend is the record of a Spend of id to state to: a Redeem
// (Acting) or a Cancel.
func AuditSpend(ctx context.Context, id ID, to State) audit.Record {
	op := audit.OpRedeem
	if to == Cancelled {
		op = audit.OpCancel
	}
	return callRecord(ctx, op, id)
}

// AuditDecide is the record of a Decide of id by p.
func AuditDecide(ctx context.Context, id ID, p Approver, approve bool) audit.Record {
	r := callRecord(ctx, audit.OpDecide, id)
	r.Approver, r.Decision, r.Answer = p.ID, "decline", ""
	if approve {
		r.Decision = "approve"
	}
	return r
}

// AuditComplete is the record of a Complete of id with an outcome of kind k.
func AuditComplete(ctx context.Context, id ID, k OutcomeKind) audit.Record {
	r := callRecord(ctx, audit.OpComplete, id)
	r.Outcome, r.Answer = k.String(), ""
	return r
}

func callRecord(ctx context.Context, op audit.Op, id ID) audit.Record {
	call, _ := audit.FromContext(ctx)
	return audit.Record{Op: op, ID: id.String(), Principal: call.Principal, Tool: call.Tool,
		ArgsDigest: call.ArgsDigest, Answer: call.Answer}
}

// auditRefusal writes the record r of a call the memory store answered
// err without changing anything, and returns err, or the trail's error if
// it could not be written (then the caller must treat the outcome as
// unknown: nothing acts on it either way).
func (m *Memory) auditRefusal(r audit.Record, err error) error {
	if m.audit == nil {
		return err
	}
	r.Result = string(ResultOf(err))
	if !audit.Recorded(r.Op, r.Result) {
		return err
	}
	if aerr := m.audit.Append(r); aerr != nil {
		return aerr
	}
	return err
}

// auditBegin writes the record r of a transition about to take effect,
// and runs the fault hook (tests: a crash between the record and the
// transition). On error nothing is written, and the transition must not
// take effect; otherwise the caller applies it, then commits p.
func (m *Memory) auditBegin(r audit.Record) (*audit.Pending, error) {
	if m.audit == nil {
		return nil, nil
	}
	r.Result = string(ResultOK)
	p, err := m.audit.Begin(r)
	if err != nil {
		return nil, err
	}
	if m.auditFault != nil {
		if err := m.auditFault(); err != nil {
			if aerr := p.Abort(); aerr != nil {
				return nil, aerr
			}
			return nil, err
		}
	}
	return p, nil
}

// refused is auditRefusal for a call that returns a Record: on the
// trail's error, no Record.
func (m *Memory) refused(rec audit.Record, r Record, err error) (Record, error) {
	if aerr := m.auditRefusal(rec, err); aerr != err {
		return Record{}, aerr
	}
	return r, err
}

// Trail returns the audit trail m writes (MemoryOptions.Audit), or nil.
func (m *Memory) Trail() audit.Trail {
	if m.audit == nil {
		return nil
	}
	return m.audit
}
