package confirm_test

import (
	"strings"
	"testing"

	approvepage "github.com/mcp-confirm/mcp-confirm/impl/approve"
	"github.com/mcp-confirm/mcp-confirm/impl/confirm"
	"github.com/mcp-confirm/mcp-confirm/impl/ledger"
)

// TestApprovalCheck: an approval that could never be given, or names
// approvers the page cannot match, is refused, saying why.
func TestApprovalCheck(t *testing.T) {
	many := make([]string, ledger.MaxApprovers+1)
	for i := range many {
		many[i] = "sub:" + strings.Repeat("a", i+1)
	}
	for _, tc := range []struct {
		name string
		a    confirm.Approval
		want string // "" for valid
	}{
		{"in band", confirm.Approval{}, ""},
		{"out of band", confirm.Approval{Mode: confirm.OutOfBand, Approvers: []string{"sub:alice"}}, ""},
		{"both, four-eyes by group", confirm.Approval{Mode: confirm.Both, Approvers: []string{"group:ops"}, Required: 2}, ""},
		{"four-eyes by subjects", confirm.Approval{Mode: confirm.OutOfBand, Approvers: []string{"sub:alice", "sub:bob"}, Required: 2}, ""},
		{"approvers in band", confirm.Approval{Approvers: []string{"sub:alice"}}, "need out-of-band"},
		{"approvals in band", confirm.Approval{Required: 2}, "need out-of-band"},
		{"no approvers", confirm.Approval{Mode: confirm.OutOfBand}, "names no approvers"},
		{"too many approvers", confirm.Approval{Mode: confirm.OutOfBand, Approvers: many}, "at most"},
		{"negative approvals", confirm.Approval{Mode: confirm.OutOfBand, Approvers: []string{"group:ops"}, Required: -1}, "want 1 to"},
		{"too many approvals", confirm.Approval{Mode: confirm.OutOfBand, Approvers: []string{"group:ops"}, Required: ledger.MaxRequired + 1}, "want 1 to"},
		{"more approvals than subjects", confirm.Approval{Mode: confirm.OutOfBand, Approvers: []string{"sub:alice", "sub:alice"}, Required: 2}, "could never be approved"},
		{"passkey", confirm.Approval{Mode: confirm.OutOfBand, Approvers: []string{"passkey:alice"}}, ""},
		{"no prefix", confirm.Approval{Mode: confirm.OutOfBand, Approvers: []string{"alice"}}, "want sub:SUBJECT, group:GROUP or passkey:NAME"},
		{"empty subject", confirm.Approval{Mode: confirm.OutOfBand, Approvers: []string{"sub:"}}, "visible text"},
		{"hidden character", confirm.Approval{Mode: confirm.OutOfBand, Approvers: []string{"sub:ali\u200bce"}}, "visible text"},
		{"bidi override", confirm.Approval{Mode: confirm.OutOfBand, Approvers: []string{"group:\u202eops"}}, "visible text"},
		{"unknown mode", confirm.Approval{Mode: confirm.Both + 1, Approvers: []string{"group:ops"}}, "approval mode"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.a.Check()
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("Check: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("Check = %v, want an error mentioning %q", err, tc.want)
			}
		})
	}
}

// The names confirm checks and gives the requester are the page's.
func TestApproverNamesArePagesNames(t *testing.T) {
	if confirm.SubjectPrefix != approvepage.SubjectPrefix || confirm.GroupPrefix != approvepage.GroupPrefix || confirm.PasskeyPrefix != approvepage.PasskeyPrefix {
		t.Fatal("confirm's approver prefixes differ from package approve's")
	}
}

func TestParseMode(t *testing.T) {
	for m := confirm.InBand; m <= confirm.Both; m++ {
		if got, err := confirm.ParseMode(m.String()); err != nil || got != m {
			t.Errorf("ParseMode(%q) = %v, %v", m.String(), got, err)
		}
	}
	for _, s := range []string{"", "out_of_band", "Both", "inband"} {
		if _, err := confirm.ParseMode(s); err == nil {
			t.Errorf("ParseMode(%q): want an error", s)
		}
	}
}

// Out-of-band approval without a page cannot be assembled: every call
// would be refused.
func TestAssembleOutOfBandNeedsPage(t *testing.T) {
	_, err := confirm.Assemble(confirm.Setup{Name: "a", Approval: confirm.Approval{Mode: confirm.OutOfBand, Approvers: []string{"group:ops"}}})
	if err == nil || !strings.Contains(err.Error(), "approval page") {
		t.Fatalf("Assemble without a page = %v, want an error naming the page", err)
	}
	_, err = confirm.Assemble(confirm.Setup{Name: "a", Approval: confirm.Approval{Mode: confirm.OutOfBand}})
	if err == nil {
		t.Fatal("Assemble with an approval naming no approvers: want an error")
	}
}
