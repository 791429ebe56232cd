package approve_test

import (
	"context"
	"fmt"
	"log"
	"net/http"
	"os"

	"github.com/mcp-confirm/mcp-confirm/impl/approve"
	"github.com/mcp-confirm/mcp-confirm/impl/ledger"
	"github.com/mcp-confirm/mcp-confirm/impl/prompt"
)

// A front door mounts the page beside its MCP endpoint (not behind the
// endpoint's bearer authentication: approvers sign in on the page), and
// issues a confirmation that needs one approval from alice or anyone in
// the group ops, never from the caller, bob.
func Example() {
	ctx := context.Background()
	l, err := ledger.New(ledger.NewMemory(ledger.MemoryOptions{}), ledger.Options{})
	if err != nil {
		log.Fatal(err)
	}
	key, err := os.ReadFile("/etc/mcp-confirm/approve.key") // 32 random bytes, the same on every replica
	if err != nil {
		log.Fatal(err)
	}
	h, err := approve.New(ctx, approve.Options{
		Ledger: l, PublicURL: "https://confirm.example.com", Key: key,
		OIDC: approve.OIDC{Issuer: "https://id.example.com", ClientID: "mcp-confirm",
			ClientSecret: os.Getenv("APPROVE_CLIENT_SECRET"), GroupsClaim: "groups", Scopes: []string{"groups"}},
	})
	if err != nil {
		log.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle(h.Prefix(), h) // /approve/
	// mux.Handle("/mcp", auth(mcpHandler))

	c, err := l.Issue(ctx, ledger.Confirmation{Tool: "delete_file", ArgsDigest: "…", Principal: "bob",
		Approval: &ledger.Approval{
			Required:  1,
			Approvers: []string{approve.SubjectPrefix + "alice", approve.GroupPrefix + "ops"},
			Requester: approve.SubjectPrefix + "bob",
			Question:  fmt.Sprintf("Delete the file %s?", prompt.Path("/srv/report.pdf", prompt.Options{})),
		}})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("send the approvers", h.Link(c.ID)) // https://confirm.example.com/approve/…
	log.Fatal(http.ListenAndServe("127.0.0.1:8080", mux))
}
