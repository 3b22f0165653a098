// Package clientconf builds the franz-go client options of kmirror's client commands
// (mirrors, groups, topics, produce, consume) from --bootstrap-server and a
// --command-config file of Apache Kafka client properties, as Kafka's tools take them.
package clientconf

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// Property is one key/value of a Java properties file, in file order.
type Property struct {
	Key, Value string
}

// ReadProperties reads a Java properties file (java.util.Properties.load
// syntax: `key=value`, `key: value` or `key value`; `#`/`!` comments;
// backslash line continuations and escapes, including \uXXXX). A key set
// twice keeps its last value at its first position.
func ReadProperties(path string) ([]Property, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var props []Property
	index := map[string]int{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 10*1024*1024)
	var logical strings.Builder
	lineNo := 0
	for sc.Scan() {
		lineNo++
		line := sc.Text()
		if logical.Len() == 0 {
			line = strings.TrimLeft(line, " \t\f")
			if line == "" || line[0] == '#' || line[0] == '!' {
				continue
			}
		} else {
			line = strings.TrimLeft(line, " \t\f")
		}
		if continued(line) {
			logical.WriteString(line[:len(line)-1])
			continue
		}
		logical.WriteString(line)
		k, v, err := splitProperty(logical.String())
		logical.Reset()
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %v", path, lineNo, err)
		}
		if i, ok := index[k]; ok {
			props[i].Value = v
			continue
		}
		index[k] = len(props)
		props = append(props, Property{k, v})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	if logical.Len() > 0 {
		k, v, err := splitProperty(logical.String())
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %v", path, lineNo, err)
		}
		if i, ok := index[k]; ok {
			props[i].Value = v
		} else {
			props = append(props, Property{k, v})
		}
	}
	return props, nil
}

// continued reports whether a line ends in an odd number of backslashes.
func continued(line string) bool {
	n := 0
	for i := len(line) - 1; i >= 0 && line[i] == '\\'; i-- {
		n++
	}
	return n%2 == 1
}

// splitProperty splits a logical line at the first unescaped '=', ':' or
// whitespace and unescapes both sides.
func splitProperty(line string) (string, string, error) {
	end := len(line)
	for i := 0; i < len(line); i++ {
		c := line[i]
		if c == '\\' {
			i++
			continue
		}
		if c == '=' || c == ':' || c == ' ' || c == '\t' || c == '\f' {
			end = i
			break
		}
	}
	key := line[:end]
	rest := strings.TrimLeft(line[end:], " \t\f")
	if rest != "" && (rest[0] == '=' || rest[0] == ':') {
		rest = strings.TrimLeft(rest[1:], " \t\f")
	}
	k, err := unescape(key)
	if err != nil {
		return "", "", err
	}
	v, err := unescape(rest)
	if err != nil {
		return "", "", err
	}
	return k, v, nil
}

func unescape(s string) (string, error) {
	if !strings.Contains(s, `\`) {
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '\\' || i == len(s)-1 {
			b.WriteByte(c)
			continue
		}
		i++
		switch s[i] {
		case 't':
			b.WriteByte('\t')
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case 'f':
			b.WriteByte('\f')
		case 'u':
			if i+5 > len(s) {
				return "", fmt.Errorf("malformed \\u escape in %q", s)
			}
			r, err := strconv.ParseUint(s[i+1:i+5], 16, 16)
			if err != nil {
				return "", fmt.Errorf("malformed \\u escape in %q", s)
			}
			b.WriteRune(rune(r))
			i += 4
		default:
			b.WriteByte(s[i])
		}
	}
	return b.String(), nil
}
