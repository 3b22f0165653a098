// Package config holds kmirror's typed broker and topic configuration with Apache
// Kafka's names, defaults and validation (Kafka's KafkaConfig, LogConfig/TopicConfig and
// ConfigDef). docs/configuration.md is generated from the definitions here
// (`go run ./cmd/kmirror config-docs`), so the two cannot drift.
package config

import (
	"bufio"
	"fmt"
	"math"
	"os"
	"sort"
	"strconv"
	"strings"
)

// Type is the type of a config value, as Kafka's ConfigDef.Type.
type Type int8

// Config value types; the numbers are Kafka's DescribeConfigs ConfigType codes.
const (
	TypeBoolean  Type = 1
	TypeString   Type = 2
	TypeInt      Type = 3
	TypeShort    Type = 4
	TypeLong     Type = 5
	TypeDouble   Type = 6
	TypeList     Type = 7
	TypePassword Type = 9
)

// Def defines one config key: its Kafka name, type, default (as text; "" with
// NoDefault for keys that have none, such as required keys), unit and meaning, and for
// topic configs the broker key that supplies the default (Kafka's synonym).
type Def struct {
	Name      string
	Type      Type
	Default   string
	NoDefault bool // no default value: DescribeConfigs shows the key only when set
	Unit      string
	Doc       string
	Synonym   string   // broker config that provides the topic default, e.g. log.retention.ms
	Valid     []string // allowed values for enumerations (lower-case)
	Min       float64  // inclusive lower bound for numbers (ignored when MinSet is false)
	MinSet    bool
	Max       float64 // inclusive upper bound for numbers (ignored when MaxSet is false)
	MaxSet    bool
	Sensitive bool
	// Dynamic marks a broker key a running broker applies when it changes (AlterConfigs
	// on the BROKER resource, Kafka's DynamicBrokerConfig); every other broker key is
	// read at start-up and a dynamic change of it is refused. The broker keys that are
	// topic-config defaults (Synonym of a topic key) are dynamic without the mark.
	Dynamic bool
	// Fallback supplies the value when the key is not set: the first set key of the
	// list, times its Factor (Kafka's KafkaConfig.logRetentionTimeMillis: log.retention.ms,
	// else log.retention.minutes, else log.retention.hours). See Values.Get.
	Fallback []Scaled
	// Unlimited marks a key where -1 means unlimited: a negative resolved value reads as
	// -1 and 0 is refused, as KafkaConfig requires of log.retention.ms.
	Unlimited bool
}

// Scaled names a coarser-unit key that supplies a finer-unit one, and the factor from
// its unit to the finer one (3600000 from hours to ms).
type Scaled struct {
	Name   string
	Factor int64
}

// Validate parses v for d and returns a one-line error naming the key and the problem.
func (d *Def) Validate(v string) error {
	v = strings.TrimSpace(v)
	bad := func(why string) error { return fmt.Errorf("invalid value %q for configuration %s: %s", v, d.Name, why) }
	switch d.Type {
	case TypeBoolean:
		if v != "true" && v != "false" {
			return bad("expected true or false")
		}
	case TypeInt, TypeShort, TypeLong:
		lo, hi := d.IntRange()
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return bad(strings.TrimSpace("expected an integer " + rangeText(lo, hi)))
		}
		if n < lo || n > hi {
			return bad("value must be " + rangeText(lo, hi))
		}
		if d.Unlimited && n == 0 {
			return bad(d.Name + " must be unlimited (-1) or at least 1")
		}
	case TypeDouble:
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return bad("expected a number")
		}
		if d.MinSet && f < d.Min {
			return bad(fmt.Sprintf("value must be at least %g", d.Min))
		}
	case TypeList:
		// An empty value is the empty list, which a key whose default is empty (such as
		// process.roles) takes as that default; Kafka's ConfigDef parses "" likewise.
		if len(d.Valid) > 0 && !(v == "" && d.Default == "") {
			for _, p := range strings.Split(v, ",") {
				if !contains(d.Valid, strings.ToLower(strings.TrimSpace(p))) {
					return bad("allowed values are " + strings.Join(d.Valid, ", "))
				}
			}
		}
	case TypeString:
		if len(d.Valid) > 0 && !contains(d.Valid, strings.ToLower(v)) {
			return bad("allowed values are " + strings.Join(d.Valid, ", "))
		}
	}
	return nil
}

// IntRange returns the inclusive bounds of an integer key: its Min/Max where set, else
// those of its type (Kafka's INT is 32-bit, SHORT 16-bit, LONG 64-bit).
func (d *Def) IntRange() (lo, hi int64) {
	switch d.Type {
	case TypeInt:
		lo, hi = math.MinInt32, math.MaxInt32
	case TypeShort:
		lo, hi = math.MinInt16, math.MaxInt16
	default:
		lo, hi = math.MinInt64, math.MaxInt64
	}
	if d.MinSet && d.Min > float64(lo) {
		lo = int64(d.Min)
	}
	if d.MaxSet && d.Max < float64(hi) {
		hi = int64(d.Max)
	}
	return lo, hi
}

// rangeText words [lo, hi] for messages, leaving out the 64-bit limits:
// "between 1 and 2147483647", "at least 1", or "" for any 64-bit integer.
func rangeText(lo, hi int64) string {
	switch {
	case lo > math.MinInt64 && hi < math.MaxInt64:
		return fmt.Sprintf("between %d and %d", lo, hi)
	case lo > math.MinInt64:
		return fmt.Sprintf("at least %d", lo)
	case hi < math.MaxInt64:
		return fmt.Sprintf("at most %d", hi)
	}
	return ""
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// Set is a set of definitions by name.
type Set map[string]*Def

// Names returns the keys sorted.
func (s Set) Names() []string {
	names := make([]string, 0, len(s))
	for n := range s {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// IsKnownBrokerKey reports whether name is a broker config kmirror reads: a key of
// Broker, or one set for a single listener as Kafka's per-listener configs are,
// listener.name.<listener>.<key> (with a SASL mechanism before sasl.jaas.config, e.g.
// listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config).
func IsKnownBrokerKey(name string) bool {
	if Broker[name] != nil {
		return true
	}
	rest, ok := strings.CutPrefix(name, "listener.name.")
	if !ok {
		return false
	}
	_, key, ok := strings.Cut(rest, ".")
	if !ok {
		return false
	}
	if mech, jaas, ok := strings.Cut(key, "."); ok && jaas == "sasl.jaas.config" && mech != "" {
		return true
	}
	return Broker[key] != nil
}

// IsDynamicBrokerKey reports whether the broker key name is applied when it changes at
// run time: marked Dynamic, or the default of a topic config.
func IsDynamicBrokerKey(name string) bool {
	d := Broker[name]
	return d != nil && (d.Dynamic || topicDefaults[name])
}

// topicDefaults are the broker keys that are a topic config's Synonym.
var topicDefaults = func() map[string]bool {
	out := map[string]bool{}
	for _, d := range Topic {
		if d.Synonym != "" {
			out[d.Synonym] = true
		}
	}
	return out
}()

func define(defs ...Def) Set {
	s := make(Set, len(defs))
	for i := range defs {
		s[defs[i].Name] = &defs[i]
	}
	return s
}

func minimum(d Def, m float64) Def { d.Min, d.MinSet = m, true; return d }

// between bounds d to [lo, hi] (Kafka's ConfigDef.Range.between).
func between(d Def, lo, hi float64) Def {
	d.Min, d.MinSet, d.Max, d.MaxSet = lo, true, hi, true
	return d
}

// Values is a resolved configuration: explicitly set values over definitions' defaults.
type Values struct {
	defs     Set
	set      map[string]string
	resolved map[string]string // values of keys with Fallback or Unlimited, from set
}

// NewValues validates set against defs and resolves the keys with a Fallback (Kafka's
// precedence log.retention.ms > log.retention.minutes > log.retention.hours). Unknown keys
// are an error naming the key when strict is true (topic configs), and kept but ignored
// otherwise (server.properties may carry keys for features kmirror does not have yet;
// Kafka warns likewise). Errors are one line naming the key and the value.
func NewValues(defs Set, set map[string]string, strict bool) (*Values, error) {
	v := &Values{defs: defs, set: map[string]string{}}
	for k, val := range set {
		d, ok := defs[k]
		if !ok {
			if strict {
				return nil, fmt.Errorf("unknown configuration %q", k)
			}
			v.set[k] = val
			continue
		}
		if err := d.Validate(val); err != nil {
			return nil, err
		}
		v.set[k] = strings.TrimSpace(val)
	}
	if err := v.resolve(); err != nil {
		return nil, err
	}
	return v, nil
}

// resolve fills v.resolved for the keys with a Fallback or Unlimited (Kafka's
// KafkaConfig.logRetentionTimeMillis, logRollTimeMillis): the key's own value, else the
// first set fallback key's value times its factor. A key with neither keeps its default.
func (v *Values) resolve() error {
	v.resolved = map[string]string{}
	for _, name := range v.defs.Names() {
		d := v.defs[name]
		if len(d.Fallback) == 0 && !d.Unlimited {
			continue
		}
		from, factor := name, int64(1)
		s, ok := v.set[name]
		for i := 0; !ok && i < len(d.Fallback); i++ {
			if s, ok = v.set[d.Fallback[i].Name]; ok {
				from, factor = d.Fallback[i].Name, d.Fallback[i].Factor
			}
		}
		if !ok {
			continue
		}
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil { // validated already; unreachable for numeric keys
			return fmt.Errorf("invalid value %q for configuration %s: expected an integer", s, from)
		}
		if n > math.MaxInt64/factor || n < math.MinInt64/factor {
			return fmt.Errorf("invalid value %q for configuration %s: %s would overflow", s, from, name)
		}
		n *= factor
		if d.Unlimited {
			if n == 0 {
				return fmt.Errorf("invalid value %q for configuration %s: %s must be unlimited (-1) or at least 1", s, from, name)
			}
			n = max(n, -1)
		}
		v.resolved[name] = strconv.FormatInt(n, 10)
	}
	return nil
}

// Get returns a key's value and whether it was set: the explicit value, or for a key
// with a Fallback the set fallback key's value in this key's unit (both count as set),
// else the default.
func (v *Values) Get(name string) (string, bool) {
	if s, ok := v.resolved[name]; ok {
		return s, true
	}
	if s, ok := v.set[name]; ok {
		return s, true
	}
	if d, ok := v.defs[name]; ok {
		return d.Default, false
	}
	return "", false
}

// Explicit returns a copy of the explicitly set values.
func (v *Values) Explicit() map[string]string {
	out := make(map[string]string, len(v.set))
	for k, s := range v.set {
		out[k] = s
	}
	return out
}

// Int64 returns an integer config; -1 stands for "unlimited" where Kafka uses it.
func (v *Values) Int64(name string) int64 {
	s, _ := v.Get(name)
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0
	}
	return n
}

// Int32 returns an int config, clamped to int32.
func (v *Values) Int32(name string) int32 {
	n := v.Int64(name)
	if n > math.MaxInt32 {
		return math.MaxInt32
	}
	return int32(n)
}

// Float returns a double config.
func (v *Values) Float(name string) float64 {
	s, _ := v.Get(name)
	f, _ := strconv.ParseFloat(s, 64)
	return f
}

// Bool returns a boolean config.
func (v *Values) Bool(name string) bool { s, _ := v.Get(name); return s == "true" }

// String returns a string config.
func (v *Values) String(name string) string { s, _ := v.Get(name); return s }

// ReadProperties reads a Java properties file (key=value or key: value, '#'/'!'
// comments, trailing-backslash continuations). Errors name the file and line.
func ReadProperties(path string) (map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[string]string{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	lineNo := 0
	var pending string
	for sc.Scan() {
		lineNo++
		line := strings.TrimLeft(sc.Text(), " \t")
		if pending == "" && (line == "" || line[0] == '#' || line[0] == '!') {
			continue
		}
		if strings.HasSuffix(line, `\`) {
			pending += strings.TrimSuffix(line, `\`)
			continue
		}
		line = pending + line
		pending = ""
		i := strings.IndexAny(line, "=:")
		if i <= 0 {
			return nil, fmt.Errorf("%s:%d: expected key=value, got %q", path, lineNo, line)
		}
		out[strings.TrimSpace(line[:i])] = strings.TrimSpace(line[i+1:])
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return out, nil
}
