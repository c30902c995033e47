package httpapi

import (
	"encoding"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"time"
)

// schemaGen derives JSON Schemas (the OpenAPI 3.1 dialect, which is JSON Schema 2020-12)
// from the Go wire types by reflection, with encoding/json's rules: the json tag names a
// member, omitempty makes it optional, "-" hides it. Named struct types become components
// (#/components/schemas/Name), so the document names the same types the Go client does.
// The schemas are as strict as the encoder: a struct allows no members it does not declare,
// so a field added to a wire type without regenerating the document fails the conformance
// test (openapi_conformance_test.go) rather than drifting silently.
type schemaGen struct {
	defs map[string]any
	// owner remembers which Go type took each component name, so that two types of one
	// name in different packages cannot silently share a schema.
	owner map[string]reflect.Type
	// input generates request bodies: no member is required (a PUT may leave metadata out,
	// the server fills it in from the path) and components are named <Type>Input, apart from
	// the answers' stricter <Type>.
	input bool
}

func newSchemaGen() *schemaGen {
	return &schemaGen{defs: map[string]any{}, owner: map[string]reflect.Type{}}
}

// inputs returns a generator of request bodies sharing g's components.
func (g *schemaGen) inputs() *schemaGen {
	return &schemaGen{defs: g.defs, owner: g.owner, input: true}
}

var (
	timeType      = reflect.TypeFor[time.Time]()
	rawType       = reflect.TypeFor[json.RawMessage]()
	numberType    = reflect.TypeFor[json.Number]()
	marshalerType = reflect.TypeFor[json.Marshaler]()
	textType      = reflect.TypeFor[encoding.TextMarshaler]()
)

// ref returns the schema of a value of type t, registering components as needed.
func (g *schemaGen) ref(t reflect.Type) map[string]any {
	switch {
	case t == timeType:
		return map[string]any{"type": "string", "format": "date-time"}
	case t == rawType || t.Kind() == reflect.Interface:
		return map[string]any{} // any JSON value
	case t == numberType:
		return map[string]any{"type": "number"}
	}
	if t.Kind() != reflect.Pointer && (t.Implements(marshalerType) || reflect.PointerTo(t).Implements(marshalerType)) {
		// A type that writes itself: its shape is not its fields'. Described as any value.
		return map[string]any{"description": "see the API documentation (" + t.String() + ")"}
	}
	if t.Kind() != reflect.Pointer && t.Implements(textType) {
		return map[string]any{"type": "string"}
	}
	switch t.Kind() {
	case reflect.Pointer:
		return g.ref(t.Elem())
	case reflect.String:
		return map[string]any{"type": "string"}
	case reflect.Bool:
		return map[string]any{"type": "boolean"}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return map[string]any{"type": "integer"}
	case reflect.Float32, reflect.Float64:
		return map[string]any{"type": "number"}
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 {
			return map[string]any{"type": "string", "contentEncoding": "base64"}
		}
		return map[string]any{"type": []any{"array", "null"}, "items": g.ref(t.Elem())}
	case reflect.Map:
		return map[string]any{"type": []any{"object", "null"}, "additionalProperties": g.ref(t.Elem())}
	case reflect.Struct:
		if t.Name() == "" {
			return g.object(t)
		}
		name := strings.ToUpper(t.Name()[:1]) + t.Name()[1:]
		if g.input {
			name += "Input"
		}
		if prev, ok := g.owner[name]; ok && prev != t {
			panic(fmt.Sprintf("openapi: two wire types named %s (%s and %s)", name, prev, t))
		}
		if _, ok := g.owner[name]; !ok {
			g.owner[name] = t
			g.defs[name] = nil // placeholder: recursive types end here
			g.defs[name] = g.object(t)
		}
		return map[string]any{"$ref": "#/components/schemas/" + name}
	}
	panic(fmt.Sprintf("openapi: no schema for Go type %s", t))
}

// object is the schema of a struct's members as encoding/json writes them.
func (g *schemaGen) object(t reflect.Type) map[string]any {
	props := map[string]any{}
	var required []any
	g.fields(t, props, &required)
	s := map[string]any{"type": "object", "properties": props, "additionalProperties": false}
	if len(required) > 0 {
		s["required"] = required
	}
	return s
}

func (g *schemaGen) fields(t reflect.Type, props map[string]any, required *[]any) {
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" || (!f.IsExported() && !f.Anonymous) {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" {
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				g.fields(ft, props, required)
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		s := g.ref(f.Type)
		omit := strings.Contains(","+opts+",", ",omitempty,") || strings.Contains(","+opts+",", ",omitzero,")
		if f.Type.Kind() == reflect.Pointer && !omit {
			s = map[string]any{"anyOf": []any{s, map[string]any{"type": "null"}}}
		}
		props[name] = s
		if !omit && !g.input {
			*required = append(*required, name)
		}
	}
}
