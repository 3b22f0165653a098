package security

import (
	"errors"
	"testing"

	"github.com/xdg-go/scram"
)

// TestScramExchange runs xdg-go/scram's client against the server exchange with a
// credential made by NewScramCredential: the right password authenticates, a wrong one
// fails with ErrAuthentication.
func TestScramExchange(t *testing.T) {
	for _, mech := range []string{MechanismScram256, MechanismScram512} {
		cred, err := NewScramCredential(mech, "alice-secret", 4096)
		if err != nil {
			t.Fatal(err)
		}
		lookup := func(m, user string) (ScramCredential, bool) { return cred, m == mech && user == "alice" }
		h, _ := scramHash(mech)
		for _, pw := range []string{"alice-secret", "wrong"} {
			cl, err := h.NewClient("alice", pw, "")
			if err != nil {
				t.Fatal(err)
			}
			conv := cl.NewConversation()
			srv, _ := NewScramExchange(mech, lookup)
			var done bool
			var serr error
			msg, _ := conv.Step("")
			for !done && serr == nil {
				var ch []byte
				ch, done, serr = srv.Next([]byte(msg))
				if serr == nil && !done {
					if msg, err = conv.Step(string(ch)); err != nil {
						t.Fatalf("%s client: %v", mech, err)
					}
				} else if done {
					if _, err := conv.Step(string(ch)); err != nil {
						t.Fatalf("%s client refused the server's final message: %v", mech, err)
					}
				}
			}
			switch {
			case pw == "alice-secret" && (serr != nil || srv.Username() != "alice"):
				t.Fatalf("%s: right password: %v, user %q", mech, serr, srv.Username())
			case pw == "wrong" && !errors.Is(serr, ErrAuthentication):
				t.Fatalf("%s: wrong password: got %v, want ErrAuthentication", mech, serr)
			}
		}
	}
	_ = scram.SHA256
}
