package cli

import (
	"bytes"
	"encoding/json"
	"regexp"
	"sort"
	"strings"

	"go.yaml.in/yaml/v3"
)

// jsonToYAML converts a JSON document to YAML without passing numbers through float64, so
// large integers print exactly as the server sent them. Object keys are sorted.
func jsonToYAML(b []byte) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(yamlNode(v)); err != nil {
		return nil, err
	}
	return buf.Bytes(), enc.Close()
}

func yamlNode(v any) *yaml.Node {
	switch t := v.(type) {
	case map[string]any:
		n := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
		keys := make([]string, 0, len(t))
		for k := range t {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			n.Content = append(n.Content, yamlString(k), yamlNode(t[k]))
		}
		return n
	case []any:
		n := &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq"}
		for _, e := range t {
			n.Content = append(n.Content, yamlNode(e))
		}
		return n
	case json.Number:
		// No explicit tag: a JSON number is a plain YAML scalar that YAML 1.2 readers resolve
		// to a number again (an explicit !!int would be printed for integers beyond int64).
		return &yaml.Node{Kind: yaml.ScalarNode, Value: yaml11Number(string(t))}
	case string:
		return yamlString(t)
	case bool:
		if t {
			return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!bool", Value: "true"}
		}
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!bool", Value: "false"}
	case nil:
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!null", Value: "null"}
	}
	return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: ""}
}

// plainSafe are the strings printed plain: they start with a letter and hold no character
// YAML gives a meaning to, so YAML 1.1 (Salt's loader, PyYAML) and YAML 1.2 readers both read
// them back as the same string. Everything else is quoted: YAML 1.1 reads plain 1:30 as 90,
// 010 as 10, yes and on as booleans, << as a merge key and = as a value key, which the
// YAML 1.2 encoder would print plain, so `pillar get -o yaml` fed to `pillar set -f` (read as
// Salt reads it) would change the data.
var plainSafe = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_./@+-]*(?: [A-Za-z0-9_./@+-]+)*$`)

// yaml11Words are the plain words YAML 1.1 readers take for booleans or null.
var yaml11Words = regexp.MustCompile(`^(?i:y|n|yes|no|on|off|true|false|null)$`)

// yamlString is a string scalar every YAML reader reads back as that string: plain when
// plainSafe, a literal block when it spans lines (the encoder falls back to double quotes
// for text a block cannot hold), double-quoted otherwise.
func yamlString(s string) *yaml.Node {
	n := &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: s}
	switch {
	case plainSafe.MatchString(s) && !yaml11Words.MatchString(s):
	case strings.Contains(strings.TrimRight(s, "\n"), "\n"):
		n.Style = yaml.LiteralStyle
	default:
		n.Style = yaml.DoubleQuotedStyle
	}
	return n
}

// yaml11Number spells a JSON number so that YAML 1.1 reads the same number: its floats need
// a '.' and a signed exponent (1e3 is a string there), so 1e3 becomes 1.0e+3.
func yaml11Number(s string) string {
	mant, exp, ok := strings.Cut(strings.ToLower(s), "e")
	if !ok {
		return s
	}
	if !strings.Contains(mant, ".") {
		mant += ".0"
	}
	if exp != "" && exp[0] != '-' && exp[0] != '+' {
		exp = "+" + exp
	}
	return mant + "e" + exp
}
