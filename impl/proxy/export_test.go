package proxy

import "github.com/modelcontextprotocol/go-sdk/mcp"

// QuestionFor is the question the gate puts for a call of the tool def
// with the canonical arguments canon (requeststate.CanonicalArguments),
// its arguments checked against def's input schema first.
func (p *Proxy) QuestionFor(def *mcp.Tool, canon []byte) (string, error) {
	return p.ask(Fingerprint(def), def, canon)
}
