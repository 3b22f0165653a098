package mirrorscli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kmirror/kmirror/internal/brokertest"
)

// TestCreateWarnsUnknownConfigs creates a mirror between two real brokers from a
// --mirror-config file with misspelled keys: one warning line names them (as written),
// and the mirror is created all the same, as Kafka clients only warn.
func TestCreateWarnsUnknownConfigs(t *testing.T) {
	src := brokertest.Start(t, nil)
	dst := brokertest.Start(t, nil)
	path := filepath.Join(t.TempDir(), "m.properties")
	text := "bootstrap.servers = " + src.Addr() + " \n" +
		"fech.max.bytes=2048\n" + // misspelled
		"mirror.fetch.min.bytes=1\n" + // first-draft alias: known
		"ssl.truststore.locaton=/etc/ca.pem\n" + // misspelled ssl.* key
		"topics.exclude=__.*, tmp.*,\n"
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	out, errOut, err := runCmd(t, "--bootstrap-server", dst.Addr(), "--create", "--mirror", "m", "--mirror-config", path)
	if err != nil {
		t.Fatalf("%v: %s", err, errOut)
	}
	if out != "Created cluster mirror m.\n" {
		t.Errorf("stdout %q", out)
	}
	want := "Warning: --mirror-config " + path + ": unknown mirror configs, ignored: fech.max.bytes, ssl.truststore.locaton\n"
	if errOut != want {
		t.Errorf("stderr %q, want %q", errOut, want)
	}
	out, errOut, err = runCmd(t, "--bootstrap-server", dst.Addr(), "--list")
	if err != nil || !strings.Contains(out, "\nm ") || !strings.Contains(out, src.Addr()+"\n") {
		t.Errorf("--list: %v %q %q", err, out, errOut)
	}

	// no unknown key: no warning
	if err := os.WriteFile(path, []byte("bootstrap.servers="+src.Addr()+"\nmirror.fetch.max.bytes=4096\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, errOut, err = runCmd(t, "--bootstrap-server", dst.Addr(), "--create", "--mirror", "m2", "--mirror-config", path)
	if err != nil || errOut != "" {
		t.Errorf("clean file: %v, stderr %q", err, errOut)
	}
}
