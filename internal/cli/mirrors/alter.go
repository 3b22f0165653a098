package mirrorscli

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/cli/clientconf"
	"github.com/kmirror/kmirror/internal/config"
	"github.com/kmirror/kmirror/internal/mirrorproto"
)

// ConfigEntry is one `--describe --configs --json` object: a config of the
// mirror's CLUSTER_MIRROR resource as DescribeConfigs returns it. Value is
// null for a secret; Source is "SET" (set on the mirror) or "DEFAULT".
type ConfigEntry struct {
	Name      string  `json:"name"`
	Value     *string `json:"value"`
	Source    string  `json:"source"`
	Sensitive bool    `json:"sensitive"`
	ReadOnly  bool    `json:"read_only"`
}

// canonicalKey is the name the server stores a mirror config under (the
// first draft's "mirror." aliases lose their prefix, as --create accepts them).
func canonicalKey(k string) string {
	n, _ := config.MirrorName(k)
	return n
}

// configError turns a DescribeConfigs / IncrementalAlterConfigs resource error
// into the CLI's error: RESOURCE_NOT_FOUND on a CLUSTER_MIRROR resource is an
// unknown mirror, reported as UNKNOWN_CLUSTER_MIRROR like the other actions.
// kmirror's messages there already start with the error name, which is not repeated.
func configError(code int16, msg *string, mirror string) error {
	if code == 0 {
		return nil
	}
	m := ""
	if msg != nil {
		m = *msg
	}
	if code == kerr.ResourceNotFound.Code {
		code = mirrorproto.UnknownClusterMirror
		if m == "" {
			m = fmt.Sprintf("cluster mirror %s does not exist", mirror)
		}
	}
	m = strings.TrimPrefix(m, mirrorproto.Name(code)+": ")
	return &mirrorproto.Error{Code: code, Message: m}
}

// mirrorConfigs sends DescribeConfigs on the CLUSTER_MIRROR resource (type 64)
// of --mirror and returns its configs in the server's order, secrets marked.
func (r *runner) mirrorConfigs(ctx context.Context) ([]ConfigEntry, error) {
	req := kmsg.NewPtrDescribeConfigsRequest()
	res := kmsg.NewDescribeConfigsRequestResource()
	res.ResourceType = kmsg.ConfigResourceType(mirrorproto.ConfigResourceTypeClusterMirror)
	res.ResourceName = r.o.mirror
	req.Resources = append(req.Resources, res)
	resp, err := r.request(ctx, req)
	if err != nil {
		return nil, err
	}
	dr := resp.(*kmsg.DescribeConfigsResponse)
	if len(dr.Resources) != 1 {
		return nil, fmt.Errorf("DescribeConfigs answered %d resources for mirror %s", len(dr.Resources), r.o.mirror)
	}
	rr := dr.Resources[0]
	if err := configError(rr.ErrorCode, rr.ErrorMessage, r.o.mirror); err != nil {
		return nil, err
	}
	out := make([]ConfigEntry, 0, len(rr.Configs))
	for _, c := range rr.Configs {
		e := ConfigEntry{Name: c.Name, Value: c.Value, Source: "SET", Sensitive: c.IsSensitive || config.MirrorSecret(c.Name), ReadOnly: c.ReadOnly}
		if c.IsDefault || c.Source == kmsg.ConfigSourceDefaultConfig {
			e.Source = "DEFAULT"
		}
		if e.Sensitive {
			e.Value = nil
		}
		out = append(out, e)
	}
	return out, nil
}

// checkAlterKeys refuses a key given twice (an alias and its canonical name,
// or both set and deleted).
func checkAlterKeys(props []clientconf.Property, deletes []string) error {
	seen := map[string]string{}
	for _, p := range props {
		n := canonicalKey(p.Key)
		if prev, ok := seen[n]; ok {
			return fmt.Errorf("--mirror-config sets %s twice (as %s and %s)", n, prev, p.Key)
		}
		seen[n] = p.Key
	}
	for _, k := range deletes {
		if prev, ok := seen[canonicalKey(k)]; ok {
			return fmt.Errorf("%s is both set by --mirror-config (as %s) and removed by --delete-config", canonicalKey(k), prev)
		}
	}
	return nil
}

// showValue renders a config value for a message: `""` when empty.
func showValue(v string) string {
	if v == "" {
		return `""`
	}
	return v
}

// wasText renders a config's value before a change: its value, "the default
// X", or "unset".
func wasText(e *ConfigEntry) string {
	switch {
	case e == nil || e.Value == nil:
		return "unset"
	case e.Source == "DEFAULT":
		return "the default " + showValue(*e.Value)
	}
	return showValue(*e.Value)
}

// alter sends IncrementalAlterConfigs on the mirror's CLUSTER_MIRROR resource:
// SET for every --mirror-config key, DELETE for every --delete-config key, in
// one request (all or nothing). It prints one line per key, never a secret's
// value. Errors: UNKNOWN_CLUSTER_MIRROR, INVALID_CONFIG (the server's reason).
func (r *runner) alter(ctx context.Context, props []clientconf.Property) error {
	mirror := r.o.mirror
	before, err := r.mirrorConfigs(ctx) // also checks that the mirror exists
	if err != nil {
		return err
	}
	res := kmsg.NewIncrementalAlterConfigsRequestResource()
	res.ResourceType = kmsg.ConfigResourceType(mirrorproto.ConfigResourceTypeClusterMirror)
	res.ResourceName = mirror
	for _, p := range props {
		v := p.Value
		res.Configs = append(res.Configs, kmsg.IncrementalAlterConfigsRequestResourceConfig{Name: p.Key, Op: kmsg.IncrementalAlterConfigOpSet, Value: &v})
	}
	deletes := nonEmpty(r.o.deleteConfig)
	for _, k := range deletes {
		res.Configs = append(res.Configs, kmsg.IncrementalAlterConfigsRequestResourceConfig{Name: k, Op: kmsg.IncrementalAlterConfigOpDelete})
	}
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	req.Resources = append(req.Resources, res)
	resp, err := r.request(ctx, req)
	if err != nil {
		return err
	}
	ar := resp.(*kmsg.IncrementalAlterConfigsResponse)
	if len(ar.Resources) != 1 {
		return fmt.Errorf("IncrementalAlterConfigs answered %d resources for mirror %s", len(ar.Resources), mirror)
	}
	if err := configError(ar.Resources[0].ErrorCode, ar.Resources[0].ErrorMessage, mirror); err != nil {
		return err
	}
	after, err := r.mirrorConfigs(ctx)
	if err != nil {
		fmt.Fprintf(r.errOut, "Warning: the configs of mirror %s were changed, but reading them back failed: %v\n", mirror, err)
	}
	find := func(list []ConfigEntry, n string) *ConfigEntry {
		for i := range list {
			if list[i].Name == n {
				return &list[i]
			}
		}
		return nil
	}
	secret := func(n string) bool {
		b, a := find(before, n), find(after, n)
		return config.MirrorSecret(n) || (b != nil && b.Sensitive) || (a != nil && a.Sensitive)
	}
	for _, p := range props {
		n := canonicalKey(p.Key)
		if secret(n) {
			fmt.Fprintf(r.out, "Set %s of mirror %s (secret: value not shown).\n", n, mirror)
			continue
		}
		old, now := find(before, n), p.Value
		if a := find(after, n); a != nil && a.Value != nil {
			now = *a.Value
		}
		if old != nil && old.Source == "SET" && old.Value != nil && *old.Value == now {
			fmt.Fprintf(r.out, "%s of mirror %s is unchanged: %s.\n", n, mirror, showValue(now))
			continue
		}
		fmt.Fprintf(r.out, "Set %s of mirror %s to %s (was %s).\n", n, mirror, showValue(now), wasText(old))
	}
	for _, k := range deletes {
		n := canonicalKey(k)
		old, now := find(before, n), find(after, n)
		if old == nil || old.Source != "SET" {
			fmt.Fprintf(r.out, "%s of mirror %s was not set: nothing removed.\n", n, mirror)
			continue
		}
		switch {
		case secret(n):
			fmt.Fprintf(r.out, "Removed %s of mirror %s.\n", n, mirror)
		case now != nil && now.Value != nil:
			fmt.Fprintf(r.out, "Removed %s of mirror %s: the default %s applies (was %s).\n", n, mirror, showValue(*now.Value), wasText(old))
		default:
			fmt.Fprintf(r.out, "Removed %s of mirror %s: now unset (was %s).\n", n, mirror, wasText(old))
		}
	}
	return nil
}

// describeConfigs prints the configs of --mirror (`--describe --configs`):
// CONFIG SOURCE VALUE (value last: some are long lists), secrets as
// "(secret)", empty values as `""`.
func (r *runner) describeConfigs(ctx context.Context) error {
	cfgs, err := r.mirrorConfigs(ctx)
	if err != nil {
		return err
	}
	if r.o.json {
		return writeJSON(r.out, cfgs)
	}
	return printConfigs(r.out, cfgs)
}

func printConfigs(w io.Writer, cfgs []ConfigEntry) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "CONFIG\tSOURCE\tVALUE")
	for _, c := range cfgs {
		v := "(secret)"
		if !c.Sensitive && c.Value != nil {
			v = showValue(*c.Value)
		}
		src := c.Source
		if c.ReadOnly {
			src += ",READ-ONLY"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", c.Name, src, v)
	}
	return tw.Flush()
}
