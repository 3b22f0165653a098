package broker

import (
	"fmt"
	"log/slog"
	"maps"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/config"
	"github.com/kmirror/kmirror/internal/mirrorproto"
	"github.com/kmirror/kmirror/internal/wire"
)

// withMirroring is a broker that runs the mirroring service, as far as the registry
// sees.
var withMirroring = &Broker{newMirrors: func(*Broker, *config.Values, *slog.Logger) Mirrors { return nil }}

// TestAPIRegistry: every registered API has a handler (ApiVersions excepted: internal/wire
// answers it) and a range within what its request type encodes; every mirror RPC is
// registered on one listener, BumpLeaderEpochs on the controller listener and the others
// on the broker listeners with mirroring only.
func TestAPIRegistry(t *testing.T) {
	for name, table := range map[string]apiTable{"broker": brokerAPIs, "controller": controllerAPIs} {
		if table[kmsg.ApiVersions.Int16()] == nil {
			t.Errorf("%s listener: ApiVersions not registered", name)
		}
		for k, a := range table {
			if a.handle == nil && k != kmsg.ApiVersions.Int16() {
				t.Errorf("%s listener: %s (key %d) has no handler", name, apiName(k), k)
			}
			if r := newRequest(k); r == nil || a.versions.Min < 0 || a.versions.Min > a.versions.Max || a.versions.Max > r.MaxVersion() {
				t.Errorf("%s listener: %s (key %d) at versions %v", name, apiName(k), k, a.versions)
			}
		}
	}
	for _, m := range mirrorproto.APIs() {
		b, c := brokerAPIs[m.Key], controllerAPIs[m.Key]
		switch {
		case m.Name == "BumpLeaderEpochs":
			if b != nil || c == nil {
				t.Errorf("%s: registered on the broker listeners %v, the controller listener %v; want the controller listener only", m.Name, b != nil, c != nil)
			}
		case c != nil || b == nil:
			t.Errorf("%s: registered on the broker listeners %v, the controller listener %v; want the broker listeners only", m.Name, b != nil, c != nil)
		case b.served(&Broker{}) || !b.served(withMirroring):
			t.Errorf("%s: served without mirroring %v, with %v", m.Name, b.served(&Broker{}), b.served(withMirroring))
		}
	}
}

// TestAPIsDocumented: the tables of docs/broker.md list the APIs of the broker listeners
// (the mirror RPCs are in docs/mirror-rpcs.md) and of the controller listener at their
// registered versions, and the API tables of docs/groups.md and docs/transactions.md
// give the registered versions of the APIs they name.
func TestAPIsDocumented(t *testing.T) {
	brokerDoc := readDoc(t, "broker.md")
	mirrorKeys := map[int16]bool{}
	for _, m := range mirrorproto.APIs() {
		mirrorKeys[m.Key] = true
	}
	for _, tc := range []struct {
		name  string
		doc   string
		table apiTable
	}{
		{"broker", section(t, brokerDoc, "## APIs and versions", "### The controller listener"), brokerAPIs},
		{"controller", section(t, brokerDoc, "### The controller listener", "\n#"), controllerAPIs},
	} {
		want := map[int16]string{}
		for k, a := range tc.table {
			if tc.name == "broker" && mirrorKeys[k] {
				continue
			}
			want[k] = rangeText(a.versions)
		}
		got := documentedRanges(t, tc.doc)
		keys := append(slices.Collect(maps.Keys(got)), slices.Collect(maps.Keys(want))...)
		slices.Sort(keys)
		for _, k := range slices.Compact(keys) {
			if got[k] != want[k] {
				t.Errorf("docs/broker.md, %s listener: %s (key %d) documented at versions %q, registered at %q", tc.name, apiName(k), k, got[k], want[k])
			}
		}
	}
	byName := map[string]*api{}
	for k, a := range brokerAPIs {
		byName[strings.ToLower(apiName(k))] = a
	}
	for _, d := range []struct{ file, section string }{{"groups.md", "## APIs"}, {"transactions.md", "## What is implemented"}} {
		n := 0
		for _, m := range namedRow.FindAllStringSubmatch(section(t, readDoc(t, d.file), d.section, "\n## "), -1) {
			if a := byName[strings.ToLower(m[1])]; a != nil {
				n++
				if m[2] != rangeText(a.versions) {
					t.Errorf("docs/%s: %s documented at versions %q, registered at %q", d.file, m[1], m[2], rangeText(a.versions))
				}
			}
		}
		if n == 0 {
			t.Errorf("docs/%s: no API found in %q", d.file, d.section)
		}
	}
}

// readDoc is the text of docs/name.
func readDoc(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile("../../docs/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// section is the text of doc from the line that starts with from up to the next until.
func section(t *testing.T, doc, from, until string) string {
	t.Helper()
	i := strings.Index(doc, "\n"+from)
	if i < 0 {
		t.Fatalf("no section %q", from)
	}
	s := doc[i+1+len(from):]
	if j := strings.Index(s, until); j >= 0 {
		s = s[:j]
	}
	return s
}

// namedRow is a row of a table whose first column starts with an API's name and whose
// second column is its versions.
var namedRow = regexp.MustCompile(`(?m)^\| *(\w+)\b[^|]*\| *(\d+(?:–\d+)?) *\|`)

var apiRow = regexp.MustCompile(`(?m)^\| *(\d+) *\| *(\w+) *\| *(\d+(?:–\d+)?)\b`)

// documentedRanges are the key → "min–max" rows of a Markdown table of APIs, checking
// each row's name against kmsg's where kmsg knows the key.
func documentedRanges(t *testing.T, doc string) map[int16]string {
	t.Helper()
	out := map[int16]string{}
	for _, m := range apiRow.FindAllStringSubmatch(doc, -1) {
		k, err := strconv.ParseInt(m[1], 10, 16)
		if err != nil {
			t.Fatal(err)
		}
		if kmsg.RequestForKey(int16(k)) != nil && !strings.EqualFold(m[2], kmsg.NameForKey(int16(k))) {
			t.Errorf("docs/broker.md: key %d is %s, not %s", k, kmsg.NameForKey(int16(k)), m[2])
		}
		out[int16(k)] = m[3]
	}
	return out
}

// rangeText is a version range as the docs write it: "3–11", or "0" for one version.
func rangeText(r wire.VersionRange) string {
	if r.Min == r.Max {
		return strconv.Itoa(int(r.Min))
	}
	return fmt.Sprintf("%d–%d", r.Min, r.Max)
}
