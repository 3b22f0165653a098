// Package security holds what kmirror's listeners and outbound connections need to speak
// Apache Kafka's security protocols: TLS configurations built from Kafka's ssl.* keys
// (PEM, PKCS12 and JKS stores), the principal of a TLS client certificate
// (ssl.principal.mapping.rules), JAAS config parsing, and the server side of the SASL
// mechanisms PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512. docs/security.md describes the
// choices.
package security
