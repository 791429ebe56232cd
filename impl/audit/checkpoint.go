package audit

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"strconv"
	"time"
)

// A Checkpoint is a signed statement that a trail's record Seq has the
// SHA-256 Head: whoever later shortens the trail below Seq, or edits a
// record up to it, is found out by anyone holding the public key.
type Checkpoint struct {
	Namespace string // the trail's (the ledger's namespace, the server's --name)
	Seq       uint64
	Head      Hash
	Time      int64 // when it was signed, microseconds since the Unix epoch
	Sig       []byte
}

// signed returns the bytes a checkpoint's signature covers.
func (c Checkpoint) signed() []byte {
	b := []byte("mcp-confirm audit checkpoint v1\n")
	b = appendString(b, c.Namespace)
	b = append(b, '\n')
	b = strconv.AppendUint(b, c.Seq, 10)
	b = append(b, '\n')
	b = hex.AppendEncode(b, c.Head[:])
	b = append(b, '\n')
	return strconv.AppendInt(b, c.Time, 10)
}

// SignCheckpoint returns the checkpoint of record seq, whose SHA-256 is
// head, in namespace ns, signed at t with key.
func SignCheckpoint(key ed25519.PrivateKey, ns string, seq uint64, head Hash, t time.Time) Checkpoint {
	c := Checkpoint{Namespace: ns, Seq: seq, Head: head, Time: t.UnixMicro()}
	c.Sig = ed25519.Sign(key, c.signed())
	return c
}

// Verify checks c's signature with pub.
func (c Checkpoint) Verify(pub ed25519.PublicKey) error {
	if len(pub) != ed25519.PublicKeySize {
		return errors.New("audit: no public key to verify the checkpoint with")
	}
	if !ed25519.Verify(pub, c.signed(), c.Sig) {
		return errors.New("audit: bad signature")
	}
	return nil
}

type checkpointWire struct {
	V         int    `json:"v"`
	Namespace string `json:"ns"`
	Seq       uint64 `json:"seq"`
	Head      string `json:"head"`
	Time      int64  `json:"time"`
	Sig       string `json:"sig"`
}

// MarshalJSON encodes c as one line of JSON.
func (c Checkpoint) MarshalJSON() ([]byte, error) {
	return json.Marshal(checkpointWire{V: Version, Namespace: c.Namespace, Seq: c.Seq, Head: hex.EncodeToString(c.Head[:]),
		Time: c.Time, Sig: base64.RawURLEncoding.EncodeToString(c.Sig)})
}

// UnmarshalJSON parses what MarshalJSON writes.
func (c *Checkpoint) UnmarshalJSON(b []byte) error {
	var w checkpointWire
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	if err := d.Decode(&w); err != nil {
		return fmt.Errorf("audit: checkpoint: %w", err)
	}
	if w.V != Version {
		return fmt.Errorf("audit: checkpoint version %d", w.V)
	}
	var v Checkpoint
	if len(w.Head) != 2*len(v.Head) {
		return errors.New("audit: checkpoint: bad head")
	}
	if _, err := hex.Decode(v.Head[:], []byte(w.Head)); err != nil {
		return fmt.Errorf("audit: checkpoint: head: %w", err)
	}
	sig, err := base64.RawURLEncoding.DecodeString(w.Sig)
	if err != nil || len(sig) != ed25519.SignatureSize {
		return errors.New("audit: checkpoint: bad signature encoding")
	}
	v.Namespace, v.Seq, v.Time, v.Sig = w.Namespace, w.Seq, w.Time, sig
	*c = v
	return nil
}

// A Trail is where a store keeps its audit records and checkpoints: what
// [Verify], export and the checkpointer read. Records are written by the
// store itself, inside its transitions; nothing here writes one.
type Trail interface {
	// Head returns the last record's seq and SHA-256 (0 and zero: none).
	Head(ctx context.Context) (uint64, Hash, error)
	// Records yields the canonical bytes of records from seq from on, in
	// seq order, as stored (a tampered store yields what it holds).
	Records(ctx context.Context, from uint64) iter.Seq2[[]byte, error]
	// AddCheckpoint keeps c.
	AddCheckpoint(ctx context.Context, c Checkpoint) error
	// Checkpoints returns the checkpoints kept.
	Checkpoints(ctx context.Context) ([]Checkpoint, error)
}

// SignHead signs the trail's head now, in namespace ns, and keeps the
// checkpoint in the trail; it returns it (for the caller to log or ship
// elsewhere too). An empty trail, or one whose head last's seq already
// signs, gets no new checkpoint: ok is false.
func SignHead(ctx context.Context, t Trail, key ed25519.PrivateKey, ns string, last uint64, now time.Time) (c Checkpoint, ok bool, err error) {
	seq, head, err := t.Head(ctx)
	if err != nil {
		return Checkpoint{}, false, fmt.Errorf("audit: checkpoint: %w", err)
	}
	if seq == 0 || seq == last {
		return Checkpoint{}, false, nil
	}
	c = SignCheckpoint(key, ns, seq, head, now)
	if err := t.AddCheckpoint(ctx, c); err != nil {
		return Checkpoint{}, false, fmt.Errorf("audit: checkpoint: %w", err)
	}
	return c, true, nil
}
