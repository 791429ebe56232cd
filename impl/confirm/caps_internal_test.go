package confirm

import (
	"encoding/json"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestMetaElicitation checks the shortcut that reads the elicitation
// capability from a request's _meta against go-sdk's own reading
// (ClientCapabilities), on capabilities as decoded from JSON.
func TestMetaElicitation(t *testing.T) {
	for _, tc := range []struct {
		caps      string // the _meta capabilities value, as JSON; "" for none
		shortcut  bool   // whether metaElicitation answers (ok)
		canElicit bool
	}{
		{caps: "", shortcut: false, canElicit: false},
		{caps: `{}`, shortcut: true, canElicit: false},
		{caps: `{"elicitation":null}`, shortcut: true, canElicit: false},
		{caps: `{"elicitation":{}}`, shortcut: true, canElicit: true},
		{caps: `{"elicitation":{"form":{}}}`, shortcut: true, canElicit: true},
		{caps: `{"elicitation":{"url":{}}}`, shortcut: true, canElicit: false},
		{caps: `{"elicitation":{"form":{},"url":{}}}`, shortcut: true, canElicit: true},
		{caps: `{"elicitation":{"form":null,"url":{}}}`, shortcut: true, canElicit: false},
		{caps: `{"elicitation":{"form":{"extra":1}},"sampling":{}}`, shortcut: true, canElicit: true},
		{caps: `{"sampling":{},"roots":{"listChanged":true}}`, shortcut: true, canElicit: false},
		// Other shapes are left to go-sdk.
		{caps: `{"elicitation":true}`, shortcut: false, canElicit: false},
		{caps: `{"elicitation":{"form":true}}`, shortcut: false, canElicit: false},
		{caps: `{"elicitation":{"url":"yes","form":{}}}`, shortcut: false, canElicit: false},
		{caps: `[]`, shortcut: false, canElicit: false},
	} {
		t.Run(tc.caps, func(t *testing.T) {
			req := &mcp.CallToolRequest{Params: &mcp.CallToolParamsRaw{Name: "t"}}
			if tc.caps != "" {
				var v any
				if err := json.Unmarshal([]byte(tc.caps), &v); err != nil {
					t.Fatal(err)
				}
				req.Params.Meta = map[string]any{mcp.MetaKeyClientCapabilities: v}
			}
			e, ok := metaElicitation(req)
			if ok != tc.shortcut {
				t.Fatalf("metaElicitation ok = %v, want %v", ok, tc.shortcut)
			}
			if got := canElicit(req); got != tc.canElicit {
				t.Fatalf("canElicit = %v, want %v", got, tc.canElicit)
			}
			if !ok {
				return
			}
			var sdk *mcp.ElicitationCapabilities
			if caps := req.ClientCapabilities(); caps != nil {
				sdk = caps.Elicitation
			}
			if (e == nil) != (sdk == nil) ||
				e != nil && ((e.Form == nil) != (sdk.Form == nil) || (e.URL == nil) != (sdk.URL == nil)) {
				t.Fatalf("metaElicitation = %+v, go-sdk reads %+v", e, sdk)
			}
		})
	}
}
