package security

import (
	"fmt"
	"strings"
)

// JAAS is one login module entry of a sasl.jaas.config value:
// `CLASS FLAG key="value" ...;`.
type JAAS struct {
	LoginModule string
	Options     map[string]string
}

// ParseJAAS parses a sasl.jaas.config value with one login module (Kafka's JaasConfig:
// class name, control flag, then key=value options, quoted or not, up to ';'). Errors
// never quote option values (they hold passwords).
func ParseJAAS(s string) (*JAAS, error) {
	p := &jaasParser{s: strings.TrimSpace(s)}
	j := &JAAS{Options: map[string]string{}}
	j.LoginModule = p.word()
	if j.LoginModule == "" {
		return nil, fmt.Errorf("sasl.jaas.config: no login module")
	}
	switch flag := strings.ToLower(p.word()); flag {
	case "required", "requisite", "sufficient", "optional":
	default:
		return nil, fmt.Errorf("sasl.jaas.config: login module %s: invalid control flag %q", j.LoginModule, flag)
	}
	for {
		p.space()
		if p.done() {
			return nil, fmt.Errorf("sasl.jaas.config: login module %s: missing ';'", j.LoginModule)
		}
		if p.s[p.i] == ';' {
			p.i++
			p.space()
			if !p.done() {
				return nil, fmt.Errorf("sasl.jaas.config must hold one login module, found more after ';'")
			}
			return j, nil
		}
		key := p.until("=; \t\r\n")
		p.space()
		if key == "" || p.done() || p.s[p.i] != '=' {
			return nil, fmt.Errorf("sasl.jaas.config: login module %s: option %q has no value", j.LoginModule, key)
		}
		p.i++
		p.space()
		v, err := p.value()
		if err != nil {
			return nil, fmt.Errorf("sasl.jaas.config: login module %s: option %s: %v", j.LoginModule, key, err)
		}
		j.Options[key] = v
	}
}

type jaasParser struct {
	s string
	i int
}

func (p *jaasParser) done() bool { return p.i >= len(p.s) }

func (p *jaasParser) space() {
	for !p.done() && strings.IndexByte(" \t\r\n", p.s[p.i]) >= 0 {
		p.i++
	}
}

func (p *jaasParser) until(stop string) string {
	start := p.i
	for !p.done() && strings.IndexByte(stop, p.s[p.i]) < 0 {
		p.i++
	}
	return p.s[start:p.i]
}

func (p *jaasParser) word() string {
	p.space()
	return p.until(" \t\r\n;")
}

// value reads a quoted value (backslash escapes, as Java's StreamTokenizer) or a bare one.
func (p *jaasParser) value() (string, error) {
	if p.done() {
		return "", fmt.Errorf("missing value")
	}
	q := p.s[p.i]
	if q != '"' && q != '\'' {
		return p.until(" \t\r\n;"), nil
	}
	p.i++
	var b strings.Builder
	for !p.done() {
		c := p.s[p.i]
		p.i++
		switch {
		case c == q:
			return b.String(), nil
		case c == '\\' && !p.done():
			b.WriteByte(p.s[p.i])
			p.i++
		default:
			b.WriteByte(c)
		}
	}
	return "", fmt.Errorf("unterminated quoted value")
}

// Credentials returns the username and password options (a client's identity, or a
// broker's own for inter-broker connections).
func (j *JAAS) Credentials() (user, password string) {
	return j.Options["username"], j.Options["password"]
}

// PlainUsers returns the PlainLoginModule's server-side users: user_NAME="password".
func (j *JAAS) PlainUsers() map[string]string {
	users := map[string]string{}
	for k, v := range j.Options {
		if name, ok := strings.CutPrefix(k, "user_"); ok {
			users[name] = v
		}
	}
	return users
}
