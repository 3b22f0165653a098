package clientconf

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/kmirror/kmirror/internal/security"
)

func TestReadProperties(t *testing.T) {
	path := filepath.Join(t.TempDir(), "m.properties")
	text := "# comment\n! other comment\n\nbootstrap.servers = src:9092\nsasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required \\\n    username=\"u\" password=\"p\\\\\\\"q\";\nmirror.topics.exclude: __.*\nkey\\=with\\:seps value \\u0041\nempty\nbootstrap.servers=src2:9092\n"
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	props, err := ReadProperties(path)
	if err != nil {
		t.Fatal(err)
	}
	want := []Property{
		{"bootstrap.servers", "src2:9092"},
		{"sasl.jaas.config", `org.apache.kafka.common.security.plain.PlainLoginModule required username="u" password="p\"q";`},
		{"mirror.topics.exclude", "__.*"},
		{"key=with:seps", "value A"},
		{"empty", ""},
	}
	if len(props) != len(want) {
		t.Fatalf("got %q", props)
	}
	for i := range want {
		if props[i] != want[i] {
			t.Errorf("prop %d = %q, want %q", i, props[i], want[i])
		}
	}
	j, err := security.ParseJAAS(props[1].Value)
	if err != nil {
		t.Fatal(err)
	}
	if u, p := j.Credentials(); u != "u" || p != `p"q` {
		t.Errorf("jaas user %q pass %q", u, p)
	}
}
