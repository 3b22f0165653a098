// Package mirrorscli is `kmirror mirrors`, the command-line client for
// Cluster Mirroring that behaves like KIP-1279's kafka-cluster-mirrors.sh
// (spec section 12). It talks to the destination cluster with the mirror
// RPCs of internal/mirrorproto.
package mirrorscli

import (
	"errors"
	"fmt"
	"regexp"
	"regexp/syntax"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/internal/cli/clientconf"
	"github.com/kmirror/kmirror/internal/config"
	"github.com/kmirror/kmirror/internal/mirrorproto"
)

// Client timeouts. An unreachable bootstrap server fails within about
// dialTimeout + retryTimeout; a slow broker gets actionTimeout per request.
const (
	dialTimeout   = 5 * time.Second
	retryTimeout  = 5 * time.Second
	actionTimeout = 2 * time.Minute
)

// ExitError is what the command returns after it has printed its one-line
// `Error: …` message (and, for a wrong combination of flags, the usage).
// The caller must not print it again and must exit with Code (always 1).
type ExitError struct {
	Err  error
	Code int
}

// Error returns the message that was printed, without the "Error: " prefix.
func (e *ExitError) Error() string { return e.Err.Error() }

// Unwrap returns the underlying error.
func (e *ExitError) Unwrap() error { return e.Err }

// actions in the order the usage lists them.
var actions = []string{"create", "alter", "delete", "list", "describe", "start", "stop", "promote", "pause", "resume", "recover"}

// flagAliases maps the first draft's spellings to the canonical flags
// (spec section 12).
var flagAliases = map[string]string{"add": "start", "remove": "stop", "topic": "topics"}

// plainTopic matches a legal Kafka topic name; any other --topics element is
// a regex.
var plainTopic = regexp.MustCompile(`^[a-zA-Z0-9._-]+$`)

type options struct {
	bootstrap     string
	commandConfig string
	action        map[string]*bool
	mirror        string
	mirrorConfig  string
	topics        []string
	topicsGiven   bool // --topics was on the command line (perhaps empty)
	exclude       []string
	deleteConfig  []string
	configs       bool
	json          bool
	failed        bool
	dryRun        bool
}

// usageError is a wrong combination of flags: printed with the usage.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return &usageError{fmt.Sprintf(format, args...)} }

// NewCommand returns the `mirrors` command: exactly one action among
// --create, --alter, --delete, --list, --describe, --start (--add), --stop
// (--remove), --pause, --resume, --recover, against --bootstrap-server.
// On failure it prints one line `Error: <reason>` to stderr (plus the usage
// for a wrong combination of flags) and returns an *ExitError.
func NewCommand() *cobra.Command {
	o := &options{action: map[string]*bool{}}
	cmd := &cobra.Command{
		Use:   "mirrors --bootstrap-server HOST:PORT (--create|--alter|--delete|--list|--describe|--start|--stop|--pause|--resume|--recover) [flags]",
		Short: "Create, list, describe and control cluster mirrors (kafka-cluster-mirrors.sh)",
		Long: `Manage cluster mirrors on a kmirror destination cluster (KIP-1279 kafka-cluster-mirrors.sh).

Exactly one action is required:
  --create    --mirror NAME --mirror-config FILE
  --alter     --mirror NAME [--mirror-config FILE] [--delete-config KEY,...]
  --delete    --mirror NAME
  --list
  --describe  [--mirror NAME] [--failed] [--json]
  --describe  --mirror NAME --configs [--json]              (configs, secrets masked)
  --start     --mirror NAME --topics CSV [--exclude CSV]   (alias --add)
  --stop      --mirror NAME --topics CSV                   (alias --remove)
  --promote   --mirror NAME --topics CSV [--dry-run]       (planned switchover: LAG 0 and syncs current, or refused)
  --pause     --mirror NAME --topics CSV
  --resume    --mirror NAME --topics CSV
  --recover   --mirror NAME --topics CSV
--topics elements are topic names or regexes (alias --topic).`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return report(cmd, usagef("unexpected argument %q (give topics as one CSV to --topics, and quote regexes such as '.*' so that the shell does not expand them)", args[0]))
			}
			return nil
		},
		SilenceErrors: true,
		SilenceUsage:  true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			err := o.run(cmd)
			if err == nil {
				return nil
			}
			return report(cmd, err)
		},
	}
	f := cmd.Flags()
	f.SortFlags = false
	f.StringVar(&o.bootstrap, "bootstrap-server", "", "the destination cluster, HOST:PORT[,HOST:PORT...] (required)")
	f.StringVar(&o.commandConfig, "command-config", "", "client properties file (security.protocol, sasl.*, ssl.truststore.*)")
	for _, a := range actions {
		o.action[a] = new(bool)
	}
	f.BoolVar(o.action["create"], "create", false, "create a cluster mirror")
	f.BoolVar(o.action["alter"], "alter", false, "change a cluster mirror's configs (--mirror-config sets, --delete-config resets to defaults)")
	f.BoolVar(o.action["delete"], "delete", false, "delete a cluster mirror (all its topics must be STOPPED)")
	f.BoolVar(o.action["list"], "list", false, "list cluster mirrors")
	f.BoolVar(o.action["describe"], "describe", false, "describe mirror partitions")
	f.BoolVar(o.action["start"], "start", false, "start mirroring topics (alias --add)")
	f.BoolVar(o.action["stop"], "stop", false, "stop mirroring topics: failover, the topics become writable (alias --remove)")
	f.BoolVar(o.action["promote"], "promote", false, "planned switchover: refuse unless LAG 0 and the config and group-offset syncs are current, run a final sync, then stop the topics")
	f.BoolVar(o.action["pause"], "pause", false, "pause mirroring topics")
	f.BoolVar(o.action["resume"], "resume", false, "resume paused mirror topics")
	f.BoolVar(o.action["recover"], "recover", false, "send FAILED partitions back to LOG_ALIGNMENT")
	f.StringVar(&o.mirror, "mirror", "", "the cluster mirror name")
	f.StringVar(&o.mirrorConfig, "mirror-config", "", "mirror properties file: --create (bootstrap.servers required), or the keys --alter sets")
	f.StringSliceVar(&o.deleteConfig, "delete-config", nil, "with --alter: CSV of mirror config keys to remove (their defaults apply)")
	f.BoolVar(&o.configs, "configs", false, "with --describe --mirror: the mirror's configs (secrets masked)")
	f.StringSliceVar(&o.topics, "topics", nil, "CSV of topic names or regexes (alias --topic)")
	f.StringSliceVar(&o.exclude, "exclude", nil, "CSV of topic names or regexes to exclude (--start only)")
	f.BoolVar(&o.json, "json", false, "print --list/--describe as a JSON array")
	f.BoolVar(&o.failed, "failed", false, "with --describe: only FAILED partitions, with retry and error")
	f.BoolVar(&o.dryRun, "dry-run", false, "validate and print what would be sent, send nothing (--promote: describe and say what it would do, change nothing)")
	f.SetNormalizeFunc(func(_ *pflag.FlagSet, name string) pflag.NormalizedName {
		if canon, ok := flagAliases[name]; ok {
			return pflag.NormalizedName(canon)
		}
		return pflag.NormalizedName(name)
	})
	cmd.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return report(c, &usageError{err.Error()})
	})
	return cmd
}

// report prints err as one line (plus the usage for a usage error) and
// wraps it in an *ExitError.
func report(cmd *cobra.Command, err error) error {
	msg := strings.ReplaceAll(strings.TrimSpace(err.Error()), "\n", " ")
	w := cmd.ErrOrStderr()
	fmt.Fprintf(w, "Error: %s\n", msg)
	var ue *usageError
	if errors.As(err, &ue) {
		fmt.Fprint(w, cmd.UsageString())
	}
	return &ExitError{Err: errors.New(msg), Code: 1}
}

// validate checks the combination of flags and returns the action.
func (o *options) validate() (string, error) {
	var chosen []string
	for _, a := range actions {
		if *o.action[a] {
			chosen = append(chosen, "--"+a)
		}
	}
	switch {
	case len(chosen) == 0:
		return "", usagef("exactly one action is required: --create, --alter, --delete, --list, --describe, --start, --stop, --promote, --pause, --resume or --recover")
	case len(chosen) > 1:
		return "", usagef("only one action is allowed, got %s", strings.Join(chosen, " and "))
	}
	action := chosen[0][2:]
	if strings.TrimSpace(o.bootstrap) == "" {
		return "", usagef("--bootstrap-server is required")
	}
	needsMirror := action != "list" && action != "describe"
	needsTopics := action == "start" || action == "stop" || action == "promote" || action == "pause" || action == "resume" || action == "recover"
	if needsMirror && o.mirror == "" {
		return "", usagef("--%s requires --mirror", action)
	}
	if action == "list" && o.mirror != "" {
		return "", usagef("--mirror is not valid with --list")
	}
	if action == "create" && o.mirrorConfig == "" {
		return "", usagef("--create requires --mirror-config")
	}
	if action != "create" && action != "alter" && o.mirrorConfig != "" {
		return "", usagef("--mirror-config is only valid with --create or --alter")
	}
	if action != "alter" && len(o.deleteConfig) > 0 {
		return "", usagef("--delete-config is only valid with --alter")
	}
	if action == "alter" && o.mirrorConfig == "" && len(nonEmpty(o.deleteConfig)) == 0 {
		return "", usagef("--alter requires --mirror-config or --delete-config")
	}
	if o.configs && action != "describe" {
		return "", usagef("--configs is only valid with --describe")
	}
	if o.configs && o.mirror == "" {
		return "", usagef("--configs requires --mirror")
	}
	if o.configs && o.failed {
		return "", usagef("--configs is not valid with --failed")
	}
	if needsTopics && o.topicsGiven && len(nonEmpty(o.topics)) == 0 {
		// a wrong value, not a missing flag: no usage
		return "", errors.New("--topics was given an empty value: give topic names or regexes as a CSV, e.g. --topics orders or --topics '.*'")
	}
	if needsTopics && len(nonEmpty(o.topics)) == 0 {
		return "", usagef("--%s requires --topics", action)
	}
	if !needsTopics && len(o.topics) > 0 {
		return "", usagef("--topics is not valid with --%s", action)
	}
	if len(o.exclude) > 0 && action != "start" {
		return "", usagef("--exclude is only valid with --start")
	}
	if o.failed && action != "describe" {
		return "", usagef("--failed is only valid with --describe")
	}
	if o.json && action != "describe" && action != "list" {
		return "", usagef("--json is only valid with --list or --describe")
	}
	for _, list := range [][]string{o.topics, o.exclude} {
		for _, t := range list {
			if t = strings.TrimSpace(t); t == "" || plainTopic.MatchString(t) {
				continue
			}
			if _, err := regexp.Compile(t); err != nil {
				// a wrong value, not a wrong combination of flags: no usage
				return "", fmt.Errorf("invalid regex %q: %v", t, regexErr(err))
			}
		}
	}
	return action, nil
}

// regexErr shortens regexp's "error parsing regexp: X: `y`" to "X".
func regexErr(err error) string {
	var se *syntax.Error
	if errors.As(err, &se) {
		return string(se.Code)
	}
	return err.Error()
}

// unknownMirrorConfigs returns the keys, as written, that are not cluster mirror configs
// (config.Mirror, with the first draft's "mirror." aliases); unlike the broker's log, an
// ssl.* or sasl.* key kmirror does not read is named too, as a misspelling.
func unknownMirrorConfigs(props []clientconf.Property) []string {
	var out []string
	for _, p := range props {
		if _, known := config.MirrorName(p.Key); !known {
			out = append(out, p.Key)
		}
	}
	return out
}

// nonEmpty returns the trimmed non-empty elements of a CSV flag.
func nonEmpty(v []string) []string {
	var out []string
	for _, s := range v {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// splitTopics separates plain topic names from regexes.
func splitTopics(v []string) (names, patterns []string) {
	for _, s := range nonEmpty(v) {
		if plainTopic.MatchString(s) {
			names = append(names, s)
		} else {
			patterns = append(patterns, s)
		}
	}
	return names, patterns
}

func (o *options) run(cmd *cobra.Command) error {
	o.topicsGiven = cmd.Flags().Changed("topics")
	action, err := o.validate()
	if err != nil {
		return err
	}
	var props []clientconf.Property
	if o.commandConfig != "" {
		if props, err = clientconf.ReadProperties(o.commandConfig); err != nil {
			return fmt.Errorf("--command-config: %v", err)
		}
	}
	var mirrorProps []clientconf.Property
	if o.mirrorConfig != "" {
		if mirrorProps, err = clientconf.ReadProperties(o.mirrorConfig); err != nil {
			return fmt.Errorf("--mirror-config: %v", err)
		}
		if len(mirrorProps) == 0 && action == "create" {
			return fmt.Errorf("--mirror-config %s holds no properties (bootstrap.servers is required)", o.mirrorConfig)
		}
		if len(mirrorProps) == 0 && len(nonEmpty(o.deleteConfig)) == 0 {
			return fmt.Errorf("--mirror-config %s holds no properties: nothing to alter", o.mirrorConfig)
		}
		if unknown := unknownMirrorConfigs(mirrorProps); len(unknown) > 0 {
			// Kafka clients only warn about unknown configs (AbstractConfig.logUnused): the
			// mirror is still created.
			fmt.Fprintf(cmd.ErrOrStderr(), "Warning: --mirror-config %s: unknown mirror configs, ignored: %s\n", o.mirrorConfig, strings.Join(unknown, ", "))
		}
	}
	if action == "alter" {
		if err := checkAlterKeys(mirrorProps, nonEmpty(o.deleteConfig)); err != nil {
			return err
		}
	}
	kopts, err := clientconf.Options(o.bootstrap, props)
	if err != nil {
		return fmt.Errorf("--command-config: %v", err)
	}
	kopts = append(kopts,
		kgo.MaxVersions(mirrorproto.ClientVersions()),
		kgo.DialTimeout(dialTimeout),
		kgo.RequestRetries(1),
		kgo.RetryTimeout(retryTimeout),
		kgo.RequestTimeoutOverhead(actionTimeout),
		kgo.ClientID("kmirror-mirrors"))
	r := &runner{o: o, out: cmd.OutOrStdout(), errOut: cmd.ErrOrStderr(), kopts: kopts}
	return r.run(cmd.Context(), action, mirrorProps)
}
