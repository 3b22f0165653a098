package security

import (
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/rand"
	"fmt"
	"hash"
	"regexp"
	"strconv"
	"strings"

	"github.com/xdg-go/scram"
)

// ScramCredential is what a broker stores of a SCRAM password (Kafka's ScramCredential):
// the salt, StoredKey = H(HMAC(SaltedPassword, "Client Key")), ServerKey =
// HMAC(SaltedPassword, "Server Key") and the iteration count. Never the password.
type ScramCredential struct {
	Salt       []byte
	StoredKey  []byte
	ServerKey  []byte
	Iterations int32
}

// SCRAM mechanism codes of AlterUserScramCredentials and Kafka's UserScramCredentialRecord
// (ScramMechanism.type).
const (
	ScramCodeSHA256 int8 = 1
	ScramCodeSHA512 int8 = 2
)

// Iteration bounds of Kafka's ScramMechanism (minIterations 4096, maxIterations 16384).
const (
	ScramMinIterations = 4096
	ScramMaxIterations = 16384
)

// ScramMechanismName is the mechanism of a code ("" for an unknown one).
func ScramMechanismName(code int8) string {
	switch code {
	case ScramCodeSHA256:
		return MechanismScram256
	case ScramCodeSHA512:
		return MechanismScram512
	}
	return ""
}

// ScramMechanismCode is the code of a mechanism name (0 for an unknown one).
func ScramMechanismCode(name string) int8 {
	switch strings.ToUpper(name) {
	case MechanismScram256:
		return ScramCodeSHA256
	case MechanismScram512:
		return ScramCodeSHA512
	}
	return 0
}

func scramHash(mechanism string) (scram.HashGeneratorFcn, bool) {
	switch strings.ToUpper(mechanism) {
	case MechanismScram256:
		return scram.SHA256, true
	case MechanismScram512:
		return scram.SHA512, true
	}
	return nil, false
}

// ScramFromSaltedPassword derives the stored credential from a salted password (what
// AlterUserScramCredentials carries), as Kafka's ScramFormatter.
func ScramFromSaltedPassword(mechanism string, salt, saltedPassword []byte, iterations int32) (ScramCredential, error) {
	h, ok := scramHash(mechanism)
	if !ok {
		return ScramCredential{}, fmt.Errorf("unknown SCRAM mechanism %q", mechanism)
	}
	mac := func(key []byte, s string) []byte {
		m := hmac.New(func() hash.Hash { return h() }, key)
		m.Write([]byte(s))
		return m.Sum(nil)
	}
	d := h()
	d.Write(mac(saltedPassword, "Client Key"))
	return ScramCredential{
		Salt: salt, StoredKey: d.Sum(nil), ServerKey: mac(saltedPassword, "Server Key"), Iterations: iterations,
	}, nil
}

// NewScramCredential salts password with a fresh random salt (Kafka's ScramFormatter: the
// password's UTF-8 bytes, PBKDF2 with HMAC of the mechanism's hash) and derives the
// stored credential.
func NewScramCredential(mechanism, password string, iterations int32) (ScramCredential, error) {
	h, ok := scramHash(mechanism)
	if !ok {
		return ScramCredential{}, fmt.Errorf("unknown SCRAM mechanism %q", mechanism)
	}
	salt := make([]byte, 32)
	rand.Read(salt)
	salted, err := pbkdf2.Key(func() hash.Hash { return h() }, password, salt, int(iterations), h().Size())
	if err != nil {
		return ScramCredential{}, err
	}
	return ScramFromSaltedPassword(mechanism, salt, salted, iterations)
}

// ScramUser is one --add-scram entry of kmirror storage format.
type ScramUser struct {
	Mechanism string
	Name      string
	Password  string
	// Iterations defaults to 4096, as kafka-storage.
	Iterations int32
}

var addScramRE = regexp.MustCompile(`^\s*(SCRAM-SHA-256|SCRAM-SHA-512)\s*=\s*\[(.*)\]\s*$`)

// ParseAddScram parses kafka-storage format's --add-scram argument,
// 'SCRAM-SHA-256=[name=alice,password=alice-secret]', optionally with iterations=N
// (kafka-storage's salt and saltedpassword keys are not accepted: kmirror draws the
// salt). Errors never quote the password.
func ParseAddScram(arg string) (ScramUser, error) {
	m := addScramRE.FindStringSubmatch(arg)
	if m == nil {
		return ScramUser{}, fmt.Errorf("--add-scram: expected SCRAM-SHA-256=[name=NAME,password=PASSWORD] or SCRAM-SHA-512=[...]")
	}
	u := ScramUser{Mechanism: m[1], Iterations: ScramMinIterations}
	for _, kv := range strings.Split(m[2], ",") {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return ScramUser{}, fmt.Errorf("--add-scram %s: expected key=value entries", m[1])
		}
		v = strings.Trim(strings.TrimSpace(v), `"`)
		switch strings.TrimSpace(k) {
		case "name":
			u.Name = v
		case "password":
			u.Password = v
		case "iterations":
			n, err := strconv.Atoi(v)
			if err != nil || n < ScramMinIterations || n > ScramMaxIterations {
				return ScramUser{}, fmt.Errorf("--add-scram %s: iterations must be between %d and %d", m[1], ScramMinIterations, ScramMaxIterations)
			}
			u.Iterations = int32(n)
		default:
			return ScramUser{}, fmt.Errorf("--add-scram %s: unknown key %q (name, password, iterations)", m[1], strings.TrimSpace(k))
		}
	}
	if u.Name == "" || u.Password == "" {
		return ScramUser{}, fmt.Errorf("--add-scram %s: name and password are required", m[1])
	}
	return u, nil
}
