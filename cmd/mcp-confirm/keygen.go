package main

import (
	"fmt"
	"io"

	"github.com/mcp-confirm/mcp-confirm/impl/audit"
	"github.com/mcp-confirm/mcp-confirm/internal/keyfile"
)

const keygenUsage = `Usage:
  mcp-confirm keygen FILE   create FILE (mode 0600; never overwritten) holding one new random key
  mcp-confirm keygen        print one new key line, e.g. to append when rotating: mcp-confirm keygen >> FILE
  mcp-confirm keygen --audit FILE
                            create FILE (mode 0600; never overwritten) holding a new Ed25519 key that signs
                            the audit trail's checkpoints (--audit-key), and print its public key line,
                            which mcp-confirm audit verify --audit-pub reads
  mcp-confirm keygen --version

Each key line is ` + keyfile.Prefix + ` and the unpadded base64url of 32 random bytes and a
4-byte check; --key-file accepts nothing else (see docs/operating.md, "Key files").
`

// runKeygen writes a new key file, or prints a key line.
func runKeygen(args []string, stdout, stderr io.Writer) int {
	switch {
	case len(args) == 1 && (args[0] == "-h" || args[0] == "-help" || args[0] == "--help"):
		fmt.Fprint(stderr, keygenUsage)
		return 0
	case len(args) == 1 && (args[0] == "-version" || args[0] == "--version"):
		return printVersion(stdout)
	case len(args) == 2 && (args[0] == "-audit" || args[0] == "--audit") && args[1] != "" && args[1][0] != '-':
		// A key of its own, not a requestState key: a verifier needs
		// only its public half, and can then neither seal requestStates
		// nor sign checkpoints; rotating requestState keys leaves it be.
		priv, pub := audit.GenerateKey()
		if err := keyfile.WriteNew(args[1], priv+"\n"); err != nil {
			fmt.Fprintf(stderr, "mcp-confirm keygen: %v\n", err)
			return 1
		}
		fmt.Fprintln(stdout, pub)
		fmt.Fprintf(stderr, "mcp-confirm keygen: wrote a new audit signing key to %s (mode 0600); its public key is above\n", args[1])
		return 0
	case len(args) == 0:
		fmt.Fprintln(stdout, keyfile.Generate())
		return 0
	case len(args) == 1 && args[0] != "" && args[0][0] != '-':
		if err := keyfile.Create(args[0]); err != nil {
			fmt.Fprintf(stderr, "mcp-confirm keygen: %v\n", err)
			return 1
		}
		fmt.Fprintf(stderr, "mcp-confirm keygen: wrote a new key to %s (mode 0600)\n", args[0])
		return 0
	}
	fmt.Fprint(stderr, "mcp-confirm keygen: want at most one FILE\n"+keygenUsage)
	return 2
}
