package proxy_test

import (
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-confirm/mcp-confirm/impl/proxy"
)

// TestFingerprintCoversWhatAnApprovalReliesOn: a change of the tool's
// name, of its input schema, or of any annotation changes the
// fingerprint, so that an approval given for the old definition is not
// forwarded to the new one (an upstream that turns a tool destructive, or
// open-world, or adds a parameter, after the question); a change of what
// no question shows (description, title, icons) does not, and the same
// definition always has the same fingerprint (the controls). A definition
// that cannot be fingerprinted has "", which matches nothing.
func TestFingerprintCoversWhatAnApprovalReliesOn(t *testing.T) {
	yes, no := true, false
	base := func() *mcp.Tool {
		return &mcp.Tool{Name: "write", Description: "Writes a file.",
			InputSchema: map[string]any{"type": "object", "properties": map[string]any{"path": map[string]any{"type": "string"}}},
			Annotations: &mcp.ToolAnnotations{DestructiveHint: &no, OpenWorldHint: &no, Title: "Write"}}
	}
	fp := proxy.Fingerprint(base())
	if !strings.HasPrefix(fp, "tool.v1.sha256:") || proxy.Fingerprint(base()) != fp {
		t.Fatalf("Fingerprint = %q, then %q: want one tool.v1.sha256: digest", fp, proxy.Fingerprint(base()))
	}
	for _, c := range []struct {
		name    string
		change  func(*mcp.Tool)
		changes bool
	}{
		{"name", func(d *mcp.Tool) { d.Name = "write2" }, true},
		{"input schema", func(d *mcp.Tool) {
			d.InputSchema.(map[string]any)["properties"].(map[string]any)["mode"] = map[string]any{"type": "string"}
		}, true},
		{"destructiveHint", func(d *mcp.Tool) { d.Annotations.DestructiveHint = &yes }, true},
		{"destructiveHint unset", func(d *mcp.Tool) { d.Annotations.DestructiveHint = nil }, true},
		{"idempotentHint", func(d *mcp.Tool) { d.Annotations.IdempotentHint = true }, true},
		{"openWorldHint", func(d *mcp.Tool) { d.Annotations.OpenWorldHint = &yes }, true},
		{"readOnlyHint", func(d *mcp.Tool) { d.Annotations.ReadOnlyHint = true }, true},
		{"annotations' title", func(d *mcp.Tool) { d.Annotations.Title = "Erase" }, true},
		{"no annotations", func(d *mcp.Tool) { d.Annotations = nil }, true},
		{"description", func(d *mcp.Tool) { d.Description = "Reads a file." }, false},
		{"title", func(d *mcp.Tool) { d.Title = "Write a file" }, false},
		{"icons", func(d *mcp.Tool) { d.Icons = []mcp.Icon{{Source: "https://example.com/i.png"}} }, false},
	} {
		d := base()
		c.change(d)
		if got := proxy.Fingerprint(d); (got != fp) != c.changes || got == "" {
			t.Errorf("%s changed: fingerprint %q, was %q; want changed %v", c.name, got, fp, c.changes)
		}
	}
	unmarshalable := base()
	unmarshalable.InputSchema = map[string]any{"type": func() {}}
	if got := proxy.Fingerprint(unmarshalable); got != "" {
		t.Errorf("a schema that does not marshal: fingerprint %q, want \"\"", got)
	}
	if got := proxy.Fingerprint(nil); got != "" {
		t.Errorf("no definition: fingerprint %q, want \"\"", got)
	}
}
