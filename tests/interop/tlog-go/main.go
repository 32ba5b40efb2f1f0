// Command tlog-go checks rpr's signed notes, checkpoints and proofs with Go's own
// implementation, golang.org/x/mod/sumdb/note and golang.org/x/mod/sumdb/tlog (installed from
// Debian's packages: golang-go and golang-golang-x-mod-dev; built in GOPATH mode by
// tests/cli/evidence_interop.rs, see .ci/install-tlog-go), and makes the same things with Go
// for rpr to check.
//
//	tlog-go check-rust DIR   verifies DIR/proof.json (rpr-proof/v0, made by rpr) with the
//	                         keys DIR/log.key.pub and DIR/witness.key.pub, the tree hash of
//	                         DIR/leaves.json (a JSON array of the leaves as strings), and
//	                         refuses corrupted copies; signs with rpr's
//	                         DIR/log.key and cosigns rpr's checkpoint as a Go witness
//	                         (a cosignature/v1 of c2sp.org/tlog-cosignature, written here
//	                         from the specification: Go's note package has none)
//	tlog-go make DIR         writes a log, its checkpoints, proofs and keys made by Go
//
// Each check prints one "ok:" line; the first failure exits 1 with its reason.
package main

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
)

// proofFile is rpr-proof/v0 (src/evidence/proof.rs).
type proofFile struct {
	Format      string       `json:"format"`
	Checkpoint  string       `json:"checkpoint"`
	Leaves      []provenLeaf `json:"leaves"`
	Consistency *consistency `json:"consistency,omitempty"`
}

type provenLeaf struct {
	Index int64    `json:"index"`
	Data  []byte   `json:"data"`
	Proof [][]byte `json:"proof"`
}

type consistency struct {
	OldCheckpoint string   `json:"old_checkpoint"`
	Proof         [][]byte `json:"proof"`
}

type checkpoint struct {
	origin string
	size   int64
	root   tlog.Hash
}

func fail(format string, args ...interface{}) {
	fmt.Fprintf(os.Stderr, "tlog-go: "+format+"\n", args...)
	os.Exit(1)
}

func ok(format string, args ...interface{}) {
	fmt.Printf("ok: "+format+"\n", args...)
}

func read(dir, name string) []byte {
	b, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		fail("%v", err)
	}
	return b
}

func write(dir, name string, data []byte) {
	if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
		fail("%v", err)
	}
}

// parseCheckpoint reads the C2SP tlog-checkpoint body: origin, size, base64 root.
func parseCheckpoint(text string) (checkpoint, error) {
	lines := strings.Split(strings.TrimSuffix(text, "\n"), "\n")
	if len(lines) < 3 || !strings.HasSuffix(text, "\n") {
		return checkpoint{}, errors.New("a checkpoint has at least three lines")
	}
	size, err := strconv.ParseInt(lines[1], 10, 64)
	if err != nil || size < 0 || strconv.FormatInt(size, 10) != lines[1] {
		return checkpoint{}, fmt.Errorf("bad size %q", lines[1])
	}
	raw, err := base64.StdEncoding.DecodeString(lines[2])
	if err != nil || len(raw) != len(tlog.Hash{}) {
		return checkpoint{}, fmt.Errorf("bad root hash %q", lines[2])
	}
	var root tlog.Hash
	copy(root[:], raw)
	return checkpoint{origin: lines[0], size: size, root: root}, nil
}

// cosigV1 is a witness key of c2sp.org/tlog-cosignature, type 0x04: its signature is an
// 8-byte big-endian time and Ed25519 over "cosignature/v1\ntime T\n" and the note's text.
type cosigV1 struct {
	name string
	hash uint32
	pub  ed25519.PublicKey
	priv ed25519.PrivateKey // only for the Go witness
}

func cosigKeyHash(name string, pub []byte) uint32 {
	h := sha256.New()
	h.Write([]byte(name + "\n"))
	h.Write([]byte{0x04})
	h.Write(pub)
	return binary.BigEndian.Uint32(h.Sum(nil))
}

func cosignedMessage(t uint64, msg []byte) []byte {
	return append([]byte(fmt.Sprintf("cosignature/v1\ntime %d\n", t)), msg...)
}

func (k *cosigV1) Name() string    { return k.name }
func (k *cosigV1) KeyHash() uint32 { return k.hash }
func (k *cosigV1) Verify(msg, sig []byte) bool {
	if len(sig) != 8+ed25519.SignatureSize {
		return false
	}
	t := binary.BigEndian.Uint64(sig[:8])
	return t < 1<<63 && ed25519.Verify(k.pub, cosignedMessage(t, msg), sig[8:])
}
func (k *cosigV1) Sign(msg []byte) ([]byte, error) {
	t := uint64(time.Now().Unix())
	sig := make([]byte, 8, 8+ed25519.SignatureSize)
	binary.BigEndian.PutUint64(sig, t)
	return append(sig, ed25519.Sign(k.priv, cosignedMessage(t, msg))...), nil
}

// parseCosigV1 reads a verifier key NAME+HASH+BASE64(0x04 || key) and checks its hash.
func parseCosigV1(vkey string) (*cosigV1, error) {
	parts := strings.SplitN(vkey, "+", 3)
	if len(parts) != 3 {
		return nil, errors.New("not NAME+HASH+KEY")
	}
	raw, err := base64.StdEncoding.DecodeString(parts[2])
	if err != nil || len(raw) != 1+ed25519.PublicKeySize || raw[0] != 0x04 {
		return nil, errors.New("not a cosignature/v1 Ed25519 key")
	}
	hash, err := strconv.ParseUint(parts[1], 16, 32)
	if err != nil || len(parts[1]) != 8 {
		return nil, fmt.Errorf("bad key hash %q", parts[1])
	}
	k := &cosigV1{name: parts[0], hash: uint32(hash), pub: ed25519.PublicKey(raw[1:])}
	if want := cosigKeyHash(k.name, k.pub); want != k.hash {
		return nil, fmt.Errorf("key hash %08x, the name and key give %08x", k.hash, want)
	}
	return k, nil
}

// verifier reads a verifier key file: Go's note.NewVerifier for a log's Ed25519 key (0x01),
// parseCosigV1 for a witness's cosignature/v1 key (0x04).
func verifier(dir, name string) note.Verifier {
	vkey := strings.TrimSuffix(string(read(dir, name)), "\n")
	if k, err := parseCosigV1(vkey); err == nil {
		return k
	}
	v, err := note.NewVerifier(vkey)
	if err != nil {
		fail("%s: note.NewVerifier: %v", name, err)
	}
	return v
}

func signer(dir, name string) note.Signer {
	s, err := note.NewSigner(strings.TrimSuffix(string(read(dir, name)), "\n"))
	if err != nil {
		fail("%s: note.NewSigner: %v", name, err)
	}
	return s
}

func openCheckpoint(msg string, vs ...note.Verifier) (*note.Note, checkpoint, error) {
	n, err := note.Open([]byte(msg), note.VerifierList(vs...))
	if err != nil {
		return nil, checkpoint{}, err
	}
	if len(n.Sigs) != len(vs) {
		return nil, checkpoint{}, fmt.Errorf("%d of %d keys signed", len(n.Sigs), len(vs))
	}
	c, err := parseCheckpoint(n.Text)
	return n, c, err
}

func hashes(list [][]byte) ([]tlog.Hash, error) {
	out := make([]tlog.Hash, len(list))
	for i, b := range list {
		if len(b) != len(tlog.Hash{}) {
			return nil, fmt.Errorf("hash %d has %d bytes", i, len(b))
		}
		copy(out[i][:], b)
	}
	return out, nil
}

// verifyProofFile is what Go requires of a proof file: every signature, every inclusion proof
// (tlog.CheckRecord), the consistency proof (tlog.CheckTree).
func verifyProofFile(p proofFile, vs ...note.Verifier) (checkpoint, error) {
	if p.Format != "rpr-proof/v0" {
		return checkpoint{}, fmt.Errorf("format %q", p.Format)
	}
	_, c, err := openCheckpoint(p.Checkpoint, vs...)
	if err != nil {
		return c, fmt.Errorf("checkpoint: %v", err)
	}
	for _, l := range p.Leaves {
		proof, err := hashes(l.Proof)
		if err != nil {
			return c, err
		}
		if err := tlog.CheckRecord(proof, c.size, c.root, l.Index, tlog.RecordHash(l.Data)); err != nil {
			return c, fmt.Errorf("leaf %d: tlog.CheckRecord: %v", l.Index, err)
		}
	}
	if p.Consistency != nil {
		_, old, err := openCheckpoint(p.Consistency.OldCheckpoint, vs[0])
		if err != nil {
			return c, fmt.Errorf("old checkpoint: %v", err)
		}
		if old.origin != c.origin {
			return c, fmt.Errorf("old checkpoint of %q, new of %q", old.origin, c.origin)
		}
		proof, err := hashes(p.Consistency.Proof)
		if err != nil {
			return c, err
		}
		if err := tlog.CheckTree(proof, c.size, c.root, old.size, old.root); err != nil {
			return c, fmt.Errorf("tlog.CheckTree %d -> %d: %v", old.size, c.size, err)
		}
	}
	return c, nil
}

// storage is an in-memory tlog: the stored hashes of every record so far.
type storage struct{ stored []tlog.Hash }

func (s *storage) ReadHashes(indexes []int64) ([]tlog.Hash, error) {
	out := make([]tlog.Hash, len(indexes))
	for i, x := range indexes {
		if x < 0 || x >= int64(len(s.stored)) {
			return nil, fmt.Errorf("no stored hash %d", x)
		}
		out[i] = s.stored[x]
	}
	return out, nil
}

func (s *storage) append(n int64, data []byte) {
	hs, err := tlog.StoredHashes(n, data, s)
	if err != nil {
		fail("tlog.StoredHashes: %v", err)
	}
	s.stored = append(s.stored, hs...)
}

func checkRust(dir string) {
	logV := verifier(dir, "log.key.pub")
	witnessV := verifier(dir, "witness.key.pub")
	ok("note.NewVerifier read rpr's verifier keys %s+%08x and %s+%08x", logV.Name(), logV.KeyHash(), witnessV.Name(), witnessV.KeyHash())
	if _, isV1 := witnessV.(*cosigV1); isV1 {
		ok("the witness key is a cosignature/v1 key (type 0x04) whose key hash Go computed the same")
	}

	var p proofFile
	if err := json.Unmarshal(read(dir, "proof.json"), &p); err != nil {
		fail("proof.json: %v", err)
	}
	c, err := verifyProofFile(p, logV, witnessV)
	if err != nil {
		fail("rpr's proof file: %v", err)
	}
	ok("note.Open verified rpr's checkpoint (log and witness signatures); tlog.CheckRecord %d inclusion proofs in a tree of %d; tlog.CheckTree the consistency proof", len(p.Leaves), c.size)

	var leaves []string
	if err := json.Unmarshal(read(dir, "leaves.json"), &leaves); err != nil {
		fail("leaves.json: %v", err)
	}
	s := &storage{}
	for i, d := range leaves {
		s.append(int64(i), []byte(d))
	}
	th, err := tlog.TreeHash(int64(len(leaves)), s)
	if err != nil {
		fail("tlog.TreeHash: %v", err)
	}
	if int64(len(leaves)) != c.size || th != c.root {
		fail("tlog.TreeHash of the %d leaves is %v; rpr's checkpoint says %d leaves, %v", len(leaves), th, c.size, c.root)
	}
	ok("tlog.TreeHash of the %d leaves equals the root in rpr's checkpoint", len(leaves))

	// Corrupted copies: Go must refuse each, or the checks above prove nothing.
	refused := 0
	for i := range p.Leaves {
		for j := range p.Leaves[i].Proof {
			bad := clone(p)
			bad.Leaves[i].Proof[j][7] ^= 1
			if _, err := verifyProofFile(bad, logV, witnessV); err == nil {
				fail("a flipped bit in leaf %d's proof hash %d verified", p.Leaves[i].Index, j)
			}
			refused++
		}
		bad := clone(p)
		bad.Leaves[i].Index ^= 1
		if _, err := verifyProofFile(bad, logV, witnessV); err == nil {
			fail("leaf %d's proof verified at index %d", p.Leaves[i].Index, bad.Leaves[i].Index)
		}
		refused++
	}
	if p.Consistency != nil {
		for j := range p.Consistency.Proof {
			bad := clone(p)
			bad.Consistency.Proof[j][0] ^= 1
			if _, err := verifyProofFile(bad, logV, witnessV); err == nil {
				fail("a flipped bit in consistency proof hash %d verified", j)
			}
			refused++
		}
	}
	bad := clone(p)
	bad.Checkpoint = strings.Replace(bad.Checkpoint, "\n"+strconv.FormatInt(c.size, 10)+"\n", "\n"+strconv.FormatInt(c.size+1, 10)+"\n", 1)
	if _, err := verifyProofFile(bad, logV, witnessV); err == nil {
		fail("a checkpoint with its size changed verified")
	}
	refused++
	ok("refused all %d corrupted copies", refused)

	// rpr's signer key file, read by Go's note.NewSigner.
	logS := signer(dir, "log.key")
	msg, err := note.Sign(&note.Note{Text: "signed by Go with rpr's key file\n"}, logS)
	if err != nil {
		fail("note.Sign: %v", err)
	}
	write(dir, "go-signed-with-rpr-key.note", msg)
	ok("note.NewSigner read rpr's signer key file and signed a note")

	// A Go witness cosigns rpr's checkpoint with a cosignature/v1.
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		fail("ed25519.GenerateKey: %v", err)
	}
	goWitness := &cosigV1{name: "go.example/witness", pub: pub, priv: priv}
	goWitness.hash = cosigKeyHash(goWitness.name, pub)
	vkey := fmt.Sprintf("%s+%08x+%s", goWitness.name, goWitness.hash, base64.StdEncoding.EncodeToString(append([]byte{0x04}, pub...)))
	n, _, err := openCheckpoint(p.Checkpoint, logV)
	if err != nil {
		fail("%v", err)
	}
	cosigned, err := note.Sign(n, goWitness)
	if err != nil {
		fail("note.Sign: %v", err)
	}
	write(dir, "go-cosigned.note", cosigned)
	write(dir, "go-witness.pub", []byte(vkey+"\n"))
	ok("cosigned rpr's checkpoint as a Go witness (cosignature/v1)")
}

func clone(p proofFile) proofFile {
	b, err := json.Marshal(p)
	if err != nil {
		fail("%v", err)
	}
	var q proofFile
	if err := json.Unmarshal(b, &q); err != nil {
		fail("%v", err)
	}
	return q
}

func makeGo(dir string) {
	const name = "go.example/log"
	skey, vkey, err := note.GenerateKey(rand.Reader, name)
	if err != nil {
		fail("note.GenerateKey: %v", err)
	}
	s, err := note.NewSigner(skey)
	if err != nil {
		fail("note.NewSigner: %v", err)
	}
	write(dir, "go-log.pub", []byte(vkey+"\n"))

	const oldSize, size = 7, 13
	var leaves []string
	st := &storage{}
	for i := 0; i < size; i++ {
		d := fmt.Sprintf("go leaf %d", i)
		leaves = append(leaves, d)
		st.append(int64(i), []byte(d))
	}
	sign := func(n int64) string {
		th, err := tlog.TreeHash(n, st)
		if err != nil {
			fail("tlog.TreeHash: %v", err)
		}
		text := fmt.Sprintf("%s\n%d\n%s\n", name, n, base64.StdEncoding.EncodeToString(th[:]))
		msg, err := note.Sign(&note.Note{Text: text}, s)
		if err != nil {
			fail("note.Sign: %v", err)
		}
		return string(msg)
	}
	p := proofFile{Format: "rpr-proof/v0", Checkpoint: sign(size)}
	for _, i := range []int64{0, 6, 12} {
		rp, err := tlog.ProveRecord(size, i, st)
		if err != nil {
			fail("tlog.ProveRecord: %v", err)
		}
		l := provenLeaf{Index: i, Data: []byte(leaves[i])}
		for _, h := range rp {
			l.Proof = append(l.Proof, append([]byte(nil), h[:]...))
		}
		p.Leaves = append(p.Leaves, l)
	}
	tp, err := tlog.ProveTree(size, oldSize, st)
	if err != nil {
		fail("tlog.ProveTree: %v", err)
	}
	p.Consistency = &consistency{OldCheckpoint: sign(oldSize)}
	for _, h := range tp {
		p.Consistency.Proof = append(p.Consistency.Proof, append([]byte(nil), h[:]...))
	}
	// Go checks its own file first.
	v, _ := note.NewVerifier(vkey)
	if _, err := verifyProofFile(p, v); err != nil {
		fail("Go's own proof file: %v", err)
	}
	b, err := json.MarshalIndent(p, "", "  ")
	if err != nil {
		fail("%v", err)
	}
	write(dir, "go-proof.json", b)
	lb, _ := json.Marshal(leaves)
	write(dir, "go-leaves.json", lb)
	ok("wrote a log of %d leaves, checkpoints at %d and %d, 3 inclusion proofs and a consistency proof, made by Go", size, oldSize, size)
}

func main() {
	if len(os.Args) != 3 {
		fail("usage: tlog-go check-rust DIR | tlog-go make DIR")
	}
	switch os.Args[1] {
	case "check-rust":
		checkRust(os.Args[2])
	case "make":
		makeGo(os.Args[2])
	default:
		fail("unknown command %q", os.Args[1])
	}
}
