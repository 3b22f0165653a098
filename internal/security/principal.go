package security

import (
	"crypto/x509"
	"fmt"
	"regexp"
	"strings"
)

// PrincipalMapper maps the distinguished name of a TLS client certificate to a user name
// with ssl.principal.mapping.rules, as Kafka's SslPrincipalMapper: the first rule whose
// pattern matches the whole DN gives the name; DEFAULT gives the DN itself.
type PrincipalMapper struct {
	rules []mappingRule
}

type mappingRule struct {
	isDefault   bool
	pattern     *regexp.Regexp
	replacement string
	toLower     bool
	toUpper     bool
}

// ruleSplitter is Kafka's SslPrincipalMapper.RULE_SPLITTER: DEFAULT, or
// RULE:pattern/replacement/[LU], separated by commas or newlines.
var ruleSplitter = regexp.MustCompile(`\s*(DEFAULT|RULE:((?:\\.|[^\\/])*)/((?:\\.|[^\\/])*)/([LU]?).*?|(.*?))\s*(?:[,\n]\s*|$)`)

// javaGroupRef matches Java's $N group references in a replacement.
var javaGroupRef = regexp.MustCompile(`\$(\d)`)

// NewPrincipalMapper parses ssl.principal.mapping.rules ("" is DEFAULT). Errors name
// the invalid rule.
func NewPrincipalMapper(rules string) (*PrincipalMapper, error) {
	if strings.TrimSpace(rules) == "" {
		rules = "DEFAULT"
	}
	m := &PrincipalMapper{}
	for _, g := range ruleSplitter.FindAllStringSubmatch(rules, -1) {
		if g[0] == "" {
			continue
		}
		if g[5] != "" {
			return nil, fmt.Errorf("ssl.principal.mapping.rules: invalid rule %q", g[5])
		}
		if g[1] == "DEFAULT" {
			m.rules = append(m.rules, mappingRule{isDefault: true})
			continue
		}
		if g[1] == "" {
			continue
		}
		re, err := regexp.Compile(`^(?:` + g[2] + `)$`)
		if err != nil {
			return nil, fmt.Errorf("ssl.principal.mapping.rules: rule %q: %v", g[1], err)
		}
		m.rules = append(m.rules, mappingRule{
			pattern:     re,
			replacement: javaGroupRef.ReplaceAllString(g[3], `$${$1}`),
			toLower:     g[4] == "L",
			toUpper:     g[4] == "U",
		})
	}
	return m, nil
}

// Name maps a distinguished name (RFC 2253, as Java's X500Principal.getName()) to a user
// name. An error means no rule matched (Kafka's NoMatchingRule: authentication fails).
func (m *PrincipalMapper) Name(dn string) (string, error) {
	for _, r := range m.rules {
		if r.isDefault {
			return dn, nil
		}
		if !r.pattern.MatchString(dn) {
			continue
		}
		out := r.pattern.ReplaceAllString(dn, r.replacement)
		switch {
		case r.toLower:
			out = strings.ToLower(out)
		case r.toUpper:
			out = strings.ToUpper(out)
		}
		return out, nil
	}
	return "", fmt.Errorf("no ssl.principal.mapping.rules rule matches %q", dn)
}

// CertPrincipal is the principal of a verified TLS client certificate, in Kafka's form
// "User:NAME" with NAME mapped from the certificate subject's RFC 2253 distinguished name.
func (m *PrincipalMapper) CertPrincipal(cert *x509.Certificate) (string, error) {
	name, err := m.Name(cert.Subject.String())
	if err != nil {
		return "", err
	}
	return "User:" + name, nil
}
