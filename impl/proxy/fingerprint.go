package proxy

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// fingerprintPrefix names the fingerprint's version, so a later change of
// what it covers never compares equal to an older one.
const fingerprintPrefix = "tool.v1.sha256:"

// Fingerprint returns a digest of what an approval of a tool call relies on
// in the tool's definition: its name, its input schema and its annotations,
// as the go-sdk client decodes them (object keys sorted, so the same
// definition always gives the same fingerprint, in any replica). The
// description, title and icons are not covered: they are never shown in a
// question. Fields the go-sdk does not decode are not covered either.
//
// A nil definition has no fingerprint: "", which matches nothing.
func Fingerprint(t *mcp.Tool) string {
	if t == nil {
		return ""
	}
	type annotations struct {
		DestructiveHint *bool  `json:"destructiveHint"`
		IdempotentHint  bool   `json:"idempotentHint"`
		OpenWorldHint   *bool  `json:"openWorldHint"`
		ReadOnlyHint    bool   `json:"readOnlyHint"`
		Title           string `json:"title"`
	}
	var a *annotations
	if t.Annotations != nil {
		// Spelt out rather than marshalled through mcp.ToolAnnotations,
		// whose encoding an environment variable (MCPGODEBUG) changes: two
		// replicas must agree.
		a = &annotations{t.Annotations.DestructiveHint, t.Annotations.IdempotentHint, t.Annotations.OpenWorldHint, t.Annotations.ReadOnlyHint, t.Annotations.Title}
	}
	b, err := json.Marshal(struct {
		Name        string       `json:"name"`
		InputSchema any          `json:"inputSchema"`
		Annotations *annotations `json:"annotations"`
	}{t.Name, t.InputSchema, a})
	if err != nil {
		// A schema that does not marshal cannot be approved: it matches
		// nothing, not even itself.
		return ""
	}
	sum := sha256.Sum256(b)
	return fingerprintPrefix + hex.EncodeToString(sum[:])
}

// maxFingerprints bounds the fingerprints a fingerprintCache keeps.
const maxFingerprints = 256

// fingerprintCache remembers the fingerprints of the definitions the
// relay's tool cache hands out, by pointer: a definition is not changed
// once read (the relay reads a new one for every change), and the cached
// one is handed out for every call until then, so a confirmed call does
// not marshal and digest the same schema again.
type fingerprintCache struct {
	mu sync.Mutex
	m  map[*mcp.Tool]string
}

// of returns Fingerprint(def).
func (fc *fingerprintCache) of(def *mcp.Tool) string {
	fc.mu.Lock()
	fp, ok := fc.m[def]
	fc.mu.Unlock()
	if ok {
		return fp
	}
	fp = Fingerprint(def)
	fc.mu.Lock()
	defer fc.mu.Unlock()
	if fc.m == nil || len(fc.m) >= maxFingerprints {
		fc.m = map[*mcp.Tool]string{}
	}
	fc.m[def] = fp
	return fp
}
