package facts

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"
)

// ErrUnknownKey is returned (wrapped) for a key that matches no fact type.
var ErrUnknownKey = errors.New("facts: unknown key")

// Segment is one '/'-separated part of a key template: a literal, or a
// variable such as {name}.
type Segment struct {
	Literal string
	Var     string // set for a variable segment
}

// FactType is one key form of the schema and the type of its values.
// A FactType is immutable once registered.
type FactType struct {
	Name     string // e.g. "desired.service.image"; the segment under schema/
	Template string // e.g. "desired/service/{name}/image"
	Segments []Segment
	Vars     []string // variable names in template order
	Value    ValueType
	Doc      string
	Builtin  bool
	// Volatile marks a fact that changes constantly and only forward, the
	// clock: a firing that read it is not guarded by its revision, since a
	// later value keeps a rule about elapsed time true, and guarding it
	// would fail every transaction that takes longer than one tick.
	Volatile bool
	// Leased marks a fact that means something only while it is attached
	// to a live etcd lease, the node's liveness: one put without a lease
	// would never expire, so it is invalid (see CheckFact).
	Leased bool
}

// Key is a parsed key: its fact type and the values of its variables, in
// the order of FactType.Vars.
type Key struct {
	Type *FactType
	Args []string
}

// String renders the key relative to the root, e.g. "observed/instance/a8f31/state".
func (k Key) String() string { return k.Type.Format(k.Args...) }

// Var returns the value of the named variable, or "" if the type has none.
func (k Key) Var(name string) string {
	for i, v := range k.Type.Vars {
		if v == name {
			return k.Args[i]
		}
	}
	return ""
}

// Format builds a key of this type from its variable values, in template
// order. It panics on a wrong number of values: that is a programmer mistake.
func (t *FactType) Format(args ...string) string {
	if len(args) != len(t.Vars) {
		panic(fmt.Sprintf("facts: %s takes %d arguments, got %d", t.Template, len(t.Vars), len(args)))
	}
	var b strings.Builder
	i := 0
	for n, s := range t.Segments {
		if n > 0 {
			b.WriteByte('/')
		}
		if s.Var != "" {
			b.WriteString(args[i])
			i++
		} else {
			b.WriteString(s.Literal)
		}
	}
	return b.String()
}

// Var types: what a variable segment may contain, by variable name.
var (
	factTypeRE   = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,127}$`)
	eventIDRE    = regexp.MustCompile(`^[0-9]{8}T[0-9]{6}\.[0-9]{9}Z-[0-9]{6,}$`)
	genericSegRE = regexp.MustCompile(`^[A-Za-z0-9._:-]{1,128}$`)
)

// validName reports whether s is a name: 1-63 lowercase letters, digits
// or '-', starting and ending with a letter or digit (^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$).
// Checked for every reference a rule decodes, so without a regexp.
func validName(s string) bool {
	if len(s) < 1 || len(s) > 63 || s[0] == '-' || s[len(s)-1] == '-' {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '-' {
			return false
		}
	}
	return true
}

// validInstanceID reports whether s is 5-16 lowercase hex characters (^[0-9a-f]{5,16}$).
func validInstanceID(s string) bool {
	if len(s) < 5 || len(s) > 16 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < 'a' || c > 'f') && (c < '0' || c > '9') {
			return false
		}
	}
	return true
}

// IntentLayers are the writers of intent/, lowest precedence first as the
// default policy resolves them.
var IntentLayers = []string{"user", "autoscaler", "policy"}

// CheckSegment reports whether value is valid for the variable named varName.
// The error says what was expected.
func CheckSegment(varName, value string) error {
	switch varName {
	case "principal":
		if !validPrincipal(value) {
			return fmt.Errorf("%q is not a valid principal: expected user:{name}, node:{node-id}, node:{prefix}*, engine or auditor", value)
		}
	case "name", "node-id", "svc":
		if !validName(value) {
			return fmt.Errorf("%q is not a valid %s: expected 1-63 lowercase letters, digits or '-', starting and ending with a letter or digit", value, varName)
		}
	case "instance-id":
		if !validInstanceID(value) {
			return fmt.Errorf("%q is not a valid instance-id: expected 5-16 lowercase hex characters such as a8f31", value)
		}
	case "port":
		p, err := strconv.Atoi(value)
		if err != nil || p < 1 || p > 65535 || strconv.Itoa(p) != value {
			return fmt.Errorf("%q is not a valid port: expected an integer from 1 to 65535", value)
		}
	case "layer":
		for _, l := range IntentLayers {
			if value == l {
				return nil
			}
		}
		return fmt.Errorf("%q is not a valid intent layer: expected one of %s", value, strings.Join(IntentLayers, "|"))
	case "fact-type":
		if !factTypeRE.MatchString(value) {
			return fmt.Errorf("%q is not a valid fact-type name: expected lowercase letters, digits, '.', '_' or '-', such as observed.node.capacity.gpu", value)
		}
	case "event-id":
		if !eventIDRE.MatchString(value) {
			return fmt.Errorf("%q is not a valid event id: expected {timestamp}-{sequence} such as 20261129T185454.000000001Z-000001", value)
		}
	default:
		if !genericSegRE.MatchString(value) {
			return fmt.Errorf("%q is not a valid key segment: expected 1-128 letters, digits, '.', '_', ':' or '-'", value)
		}
	}
	return nil
}

// validPrincipal: the name of a client certificate's principal
// (facts/access says what each may do).
func validPrincipal(p string) bool {
	switch p {
	case "engine", "auditor":
		return true
	}
	kind, name, ok := strings.Cut(p, ":")
	if !ok || (kind != "user" && kind != "node") || len(p) > 128 {
		return false
	}
	if kind == "node" && strings.HasSuffix(name, "*") {
		name = strings.TrimSuffix(name, "*")
		return name == "" || strings.Trim(name, "abcdefghijklmnopqrstuvwxyz0123456789-_.") == ""
	}
	return validName(name)
}

// ParseTemplate splits a key template such as "observed/node/{node-id}/capacity/gpu".
func ParseTemplate(tmpl string) ([]Segment, []string, error) {
	if tmpl == "" {
		return nil, nil, errors.New("empty key template")
	}
	parts := strings.Split(tmpl, "/")
	segs := make([]Segment, len(parts))
	var vars []string
	seen := map[string]bool{}
	for i, p := range parts {
		if strings.HasPrefix(p, "{") && strings.HasSuffix(p, "}") {
			v := p[1 : len(p)-1]
			if v == "" || !genericSegRE.MatchString(v) {
				return nil, nil, fmt.Errorf("template %q: segment %d: bad variable name %q", tmpl, i+1, p)
			}
			if seen[v] {
				return nil, nil, fmt.Errorf("template %q: variable {%s} appears twice", tmpl, v)
			}
			seen[v] = true
			segs[i] = Segment{Var: v}
			vars = append(vars, v)
			continue
		}
		if p == "" || strings.ContainsAny(p, "{}") || !genericSegRE.MatchString(p) {
			return nil, nil, fmt.Errorf("template %q: segment %d: %q is not a literal or a {variable}", tmpl, i+1, p)
		}
		segs[i] = Segment{Literal: p}
	}
	if segs[0].Var != "" {
		return nil, nil, fmt.Errorf("template %q: the first segment must be a literal tree name", tmpl)
	}
	return segs, vars, nil
}

// Schema is the table of fact types: the built-ins of the key schema and
// plugin types registered under schema/ at run time. It is safe for
// concurrent use; mu guards types, byName and trie.
type Schema struct {
	mu     sync.RWMutex
	types  []*FactType
	byName map[string]*FactType
	trie   *trieNode
}

type trieNode struct {
	lit map[string]*trieNode
	v   *trieNode // the variable child, at most one per position
	typ *FactType // a template ends here
}

// NewSchema returns a schema holding the built-in fact types.
func NewSchema() *Schema {
	s := &Schema{byName: map[string]*FactType{}, trie: &trieNode{}}
	for _, b := range builtins {
		if err := s.add(b.name, b.tmpl, b.vt, b.doc, true); err != nil {
			panic(err)
		}
		s.byName[b.name].Volatile = volatileTypes[b.name]
		s.byName[b.name].Leased = leasedTypes[b.name]
	}
	return s
}

// Default is the schema of the built-in key forms. Code that knows no plugin
// types uses it; a server that honours schema/ registrations keeps its own.
var Default = NewSchema()

// Register adds a plugin fact type. Registering the same name with the same
// template and type again is a no-op; anything else that clashes is an error.
func (s *Schema) Register(name, tmpl string, vt ValueType, doc string) error {
	return s.add(name, tmpl, vt, doc, false)
}

func (s *Schema) add(name, tmpl string, vt ValueType, doc string, builtin bool) error {
	if err := CheckSegment("fact-type", name); err != nil {
		return err
	}
	segs, vars, err := ParseTemplate(tmpl)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if old, ok := s.byName[name]; ok {
		if old.Template == tmpl && old.Value.Kind == vt.Kind {
			return nil
		}
		return fmt.Errorf("fact type %s is already registered as %s (%s)", name, old.Template, old.Value.Kind)
	}
	n := s.trie
	for _, sg := range segs {
		if sg.Var != "" {
			if n.v == nil {
				n.v = &trieNode{}
			}
			n = n.v
			continue
		}
		if n.lit == nil {
			n.lit = map[string]*trieNode{}
		}
		c := n.lit[sg.Literal]
		if c == nil {
			c = &trieNode{}
			n.lit[sg.Literal] = c
		}
		n = c
	}
	if n.typ != nil {
		return fmt.Errorf("template %s has the same shape as %s (fact type %s)", tmpl, n.typ.Template, n.typ.Name)
	}
	ft := &FactType{Name: name, Template: tmpl, Segments: segs, Vars: vars, Value: vt, Doc: doc, Builtin: builtin}
	n.typ = ft
	s.types = append(s.types, ft)
	s.byName[name] = ft
	return nil
}

// Types returns every fact type, sorted by template.
func (s *Schema) Types() []*FactType {
	s.mu.RLock()
	out := append([]*FactType(nil), s.types...)
	s.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Template < out[j].Template })
	return out
}

// Type returns the fact type of the given name.
func (s *Schema) Type(name string) (*FactType, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	t, ok := s.byName[name]
	return t, ok
}

// TypeOf returns the fact type whose template is exactly tmpl
// (variable names ignored: "observed/instance/{i}/state" finds observed.instance.state).
func (s *Schema) TypeOf(tmpl string) (*FactType, bool) {
	segs, _, err := ParseTemplate(tmpl)
	if err != nil {
		return nil, false
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	n := s.trie
	for _, sg := range segs {
		if sg.Var != "" {
			n = n.v
		} else {
			n = n.lit[sg.Literal]
		}
		if n == nil {
			return nil, false
		}
	}
	return n.typ, n.typ != nil
}

// Parse parses a key relative to the root. A literal segment is preferred to
// a variable at the same position. The error names the key and what was expected.
func (s *Schema) Parse(key string) (Key, error) {
	var buf [maxSegments]string
	ft, parts, err := s.typeOf(key, buf[:0])
	if err != nil {
		return Key{}, err
	}
	args := make([]string, 0, len(ft.Vars))
	for i, sg := range ft.Segments {
		if sg.Var != "" {
			args = append(args, parts[i])
		}
	}
	return Key{Type: ft, Args: args}, nil
}

// KeyType is Parse's fact type alone, with the same errors: the evaluator
// types every change and write it meets, and needs no more.
func (s *Schema) KeyType(key string) (*FactType, error) {
	var buf [maxSegments]string
	ft, _, err := s.typeOf(key, buf[:0])
	return ft, err
}

// maxSegments is the segments a key splits into without allocating
// (the longest builtin form has 6).
const maxSegments = 12

// typeOf finds key's fact type and checks its variable segments; parts
// (key split at "/") is appended to buf.
func (s *Schema) typeOf(key string, buf []string) (*FactType, []string, error) {
	parts := SplitKey(buf, key)
	s.mu.RLock()
	ft := match(s.trie, parts)
	s.mu.RUnlock()
	if ft == nil {
		return nil, nil, fmt.Errorf("%w %q: it matches no key form of the schema (see `ccattler facts schema`)", ErrUnknownKey, key)
	}
	for i, sg := range ft.Segments {
		if sg.Var == "" {
			continue
		}
		if err := CheckSegment(sg.Var, parts[i]); err != nil {
			return nil, nil, fmt.Errorf("key %q (%s): %w", key, ft.Template, err)
		}
	}
	return ft, parts, nil
}

// SplitKey appends key's segments to dst: strings.Split(key, "/") without
// its allocation when dst has room.
func SplitKey(dst []string, key string) []string {
	for {
		i := strings.IndexByte(key, '/')
		if i < 0 {
			return append(dst, key)
		}
		dst = append(dst, key[:i])
		key = key[i+1:]
	}
}

func match(n *trieNode, parts []string) *FactType {
	if len(parts) == 0 {
		return n.typ
	}
	if c := n.lit[parts[0]]; c != nil {
		if t := match(c, parts[1:]); t != nil {
			return t
		}
	}
	if n.v != nil && parts[0] != "" {
		return match(n.v, parts[1:])
	}
	return nil
}

// Validate checks that key is a known key form and raw a valid value for it.
// The error names the key, the value and what was expected.
func (s *Schema) Validate(key string, raw []byte) (Key, error) {
	k, err := s.Parse(key)
	if err != nil {
		return Key{}, err
	}
	if _, err := k.Type.Value.Decode(raw); err != nil {
		return Key{}, fmt.Errorf("invalid value %s for %s: %w", Shorten(raw, 80), key, err)
	}
	return k, nil
}

// CheckFact returns why a stored fact breaks the schema, or nil: its key
// (a known form with valid segments), its value, and for a Leased type its
// etcd lease. It is what a Table records as Fact.Invalid.
func (s *Schema) CheckFact(f Fact) (Key, error) {
	k, err := s.Parse(f.Key)
	if err != nil {
		return Key{}, err
	}
	return k, s.checkValue(k, f)
}

func (s *Schema) checkValue(k Key, f Fact) error {
	if _, err := k.Type.Value.Decode(f.Value); err != nil {
		return fmt.Errorf("invalid value %s for %s: %v", Shorten(f.Value, 80), f.Key, err)
	}
	if k.Type.Leased && f.Lease == 0 {
		return fmt.Errorf("%s is not attached to an etcd lease: it would never expire, so it says nothing about liveness (an agent puts it with its lease)", f.Key)
	}
	return nil
}

// Decode parses key and returns its decoded value (see ValueType.Decode).
func (s *Schema) Decode(key string, raw []byte) (Key, any, error) {
	k, err := s.Parse(key)
	if err != nil {
		return Key{}, nil, err
	}
	v, err := k.Type.Value.Decode(raw)
	if err != nil {
		return Key{}, nil, fmt.Errorf("invalid value %s for %s: %w", Shorten(raw, 80), key, err)
	}
	return k, v, nil
}

// Encode validates v against key's type and returns its canonical stored form.
func (s *Schema) Encode(key string, v any) ([]byte, error) {
	k, err := s.Parse(key)
	if err != nil {
		return nil, err
	}
	raw, err := k.Type.Value.Encode(v)
	if err != nil {
		return nil, fmt.Errorf("invalid value %s for %s: %w", Shorten([]byte(fmt.Sprint(v)), 80), key, err)
	}
	return raw, nil
}

// Shorten renders at most n bytes of a value for a message, with the
// characters CheckText refuses escaped: a message must neither carry a
// 5 MB value whole nor let a bidirectional override reorder its line.
func Shorten(b []byte, n int) string {
	var out strings.Builder
	for i := 0; i < len(b); {
		if i >= n {
			out.WriteString("...")
			break
		}
		r, size := utf8.DecodeRune(b[i:])
		if CheckText(string(b[i:i+size])) != nil {
			fmt.Fprintf(&out, "\\u%04x", r)
		} else {
			out.Write(b[i : i+size])
		}
		i += size
	}
	return out.String()
}

// Registration is the value stored at schema/{fact-type}.
type Registration struct {
	Key    string               `json:"key"`
	Type   string               `json:"type"`
	Enum   []string             `json:"enum,omitempty"`
	Min    *float64             `json:"min,omitempty"`
	Max    *float64             `json:"max,omitempty"`
	Fields map[string]string    `json:"fields,omitempty"`
	Format string               `json:"format,omitempty"`
	Doc    string               `json:"doc,omitempty"`
	fields map[string]ValueKind // decoded Fields
}

// RegistrationOf describes a fact type as stored under schema/.
func RegistrationOf(t *FactType) Registration {
	r := Registration{Key: t.Template, Type: t.Value.Kind.String(), Enum: t.Value.Enum,
		Min: t.Value.Min, Max: t.Value.Max, Format: t.Value.Format, Doc: t.Doc}
	if len(t.Value.Fields) > 0 {
		r.Fields = map[string]string{}
		for n, k := range t.Value.Fields {
			r.Fields[n] = k.String()
		}
	}
	return r
}

// EncodeRegistration renders r as stored under schema/{fact-type}.
func EncodeRegistration(r Registration) []byte {
	b, _ := json.Marshal(r)
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	out, _ := CanonicalJSON(m)
	return out
}

// ParseRegistration decodes a schema/{fact-type} value.
func ParseRegistration(raw []byte) (Registration, ValueType, error) {
	var r Registration
	if err := checkValueSize(raw); err != nil {
		return r, ValueType{}, err
	}
	if err := json.Unmarshal(raw, &r); err != nil {
		return r, ValueType{}, fmt.Errorf("not a fact type registration: %v", err)
	}
	k, ok := ParseValueKind(r.Type)
	if !ok {
		return r, ValueType{}, fmt.Errorf("unknown value type %q: expected one of object, string, int, number, bool, enum, cpu, memory, duration, time, ip, json", r.Type)
	}
	if _, _, err := ParseTemplate(r.Key); err != nil {
		return r, ValueType{}, err
	}
	vt := ValueType{Kind: k, Enum: r.Enum, Min: r.Min, Max: r.Max, Format: r.Format}
	if k == KindEnum && len(r.Enum) == 0 {
		return r, ValueType{}, errors.New(`an enum needs "enum": [...] values`)
	}
	for n, ks := range r.Fields {
		fk, ok := ParseValueKind(ks)
		if !ok {
			return r, ValueType{}, fmt.Errorf("field %q: unknown value type %q", n, ks)
		}
		if vt.Fields == nil {
			vt.Fields = map[string]ValueKind{}
		}
		vt.Fields[n] = fk
	}
	return r, vt, nil
}

// RegisterFrom applies a schema/{fact-type} registration read from the store.
func (s *Schema) RegisterFrom(name string, raw []byte) error {
	r, vt, err := ParseRegistration(raw)
	if err != nil {
		return fmt.Errorf("schema/%s: %w", name, err)
	}
	if err := s.Register(name, r.Key, vt, r.Doc); err != nil {
		return fmt.Errorf("schema/%s: %w", name, err)
	}
	return nil
}
