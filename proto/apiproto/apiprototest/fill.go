// Package apiprototest checks that values survive a conversion or an
// encoding with every field: it fills every exported field of a Go value
// by reflection, so that a field added to a type later and forgotten by a
// converter or a codec fails the checks without anyone listing it.
package apiprototest

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/stratahq/strata/internal/api"
)

// Fill sets every exported field of *v to a distinct non-zero value (see
// filler) and returns what it could not fill. Two calls fill a type
// identically, so a second filled value is the expected one.
func Fill[T any](v *T, root string) []string {
	f := &filler{}
	f.fill(reflect.ValueOf(v).Elem(), root)
	return f.errs
}

// Diff names every path under root where got and want differ, as
// "path: got …; want …".
func Diff[T any](root string, got, want T) []string {
	return diff(root, reflect.ValueOf(got), reflect.ValueOf(want))
}

// Compare requires reflect.DeepEqual and explains a difference field
// by field.
func Compare[T any](what string, got, want T) []string {
	if reflect.DeepEqual(got, want) {
		return nil
	}
	name := reflect.TypeFor[T]().Name()
	diffs := Diff(name, got, want)
	if len(diffs) == 0 {
		diffs = []string{name + ": not reflect.DeepEqual, but no field differs"}
	}
	for i := range diffs {
		diffs[i] = what + ": " + diffs[i]
	}
	return diffs
}

// ---- filler ----

var (
	timeType     = reflect.TypeFor[time.Time]()
	durationType = reflect.TypeFor[api.Duration]()
	baseTime     = time.Date(2025, 3, 14, 15, 9, 26, 0, time.UTC)
)

// filler sets every exported field of a value to a distinct non-zero
// value: strings name their field, numbers count up, booleans are true,
// pointers are allocated, slices get two elements and maps two entries.
// Two fillers fill the same type identically.
type filler struct {
	n    int
	errs []string
}

func (f *filler) next() int {
	f.n++
	return f.n
}

func (f *filler) fill(v reflect.Value, path string) {
	if strings.Count(path, ".") > 20 {
		f.errs = append(f.errs, path+": nesting too deep (recursive type?)")
		return
	}
	switch v.Type() {
	case timeType:
		n := f.next()
		// Microseconds, in UTC: what a Timestamp returns exactly.
		t := baseTime.Add(time.Duration(n)*time.Hour + time.Duration(n)*7*time.Microsecond)
		v.Set(reflect.ValueOf(t.Truncate(time.Microsecond)))
		return
	case durationType:
		n := f.next()
		v.Set(reflect.ValueOf(api.D(time.Duration(n)*time.Second + 250*time.Millisecond)))
		return
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString(fmt.Sprintf("%s#%d", path[strings.LastIndexAny(path, ".]")+1:], f.next()))
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32:
		v.SetInt(int64(f.next()))
	case reflect.Int64:
		// Beyond 32 bits, to catch a narrowing.
		n := int64(f.next())
		v.SetInt(n<<33 | n)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(uint64(f.next()))
	case reflect.Float32, reflect.Float64:
		v.SetFloat(float64(f.next()) + 0.5)
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		f.fill(v.Elem(), path)
	case reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 2, 2))
		for i := range 2 {
			f.fill(v.Index(i), fmt.Sprintf("%s[%d]", path, i))
		}
	case reflect.Map:
		v.Set(reflect.MakeMapWithSize(v.Type(), 2))
		for i := range 2 {
			k := reflect.New(v.Type().Key()).Elem()
			f.fill(k, fmt.Sprintf("%s.key%d", path, i))
			e := reflect.New(v.Type().Elem()).Elem()
			f.fill(e, fmt.Sprintf("%s[%v]", path, k))
			v.SetMapIndex(k, e)
		}
	case reflect.Struct:
		for i := range v.NumField() {
			sf := v.Type().Field(i)
			if !sf.IsExported() {
				f.errs = append(f.errs, fmt.Sprintf("%s.%s: unexported field; teach filler about %s", path, sf.Name, v.Type()))
				continue
			}
			f.fill(v.Field(i), path+"."+sf.Name)
		}
	default:
		f.errs = append(f.errs, fmt.Sprintf("%s: cannot fill a %s", path, v.Type()))
	}
}

// ---- diff ----

// diff names every path where got and want differ, as
// "path: got …; want …".
func diff(path string, got, want reflect.Value) []string {
	if !got.IsValid() || !want.IsValid() || got.Type() != want.Type() {
		return []string{fmt.Sprintf("%s: got %v; want %v", path, got, want)}
	}
	if reflect.DeepEqual(got.Interface(), want.Interface()) {
		return nil
	}
	leaf := func() []string {
		return []string{fmt.Sprintf("%s: got %s; want %s", path, show(got), show(want))}
	}
	switch got.Kind() {
	case reflect.Pointer:
		if got.IsNil() || want.IsNil() {
			return leaf()
		}
		return diff(path, got.Elem(), want.Elem())
	case reflect.Struct:
		t := got.Type()
		for i := range t.NumField() {
			if !t.Field(i).IsExported() {
				return leaf() // time.Time and the like
			}
		}
		var out []string
		for i := range t.NumField() {
			out = append(out, diff(path+"."+t.Field(i).Name, got.Field(i), want.Field(i))...)
		}
		if len(out) == 0 {
			return leaf()
		}
		return out
	case reflect.Slice:
		if got.IsNil() != want.IsNil() {
			return leaf()
		}
		if got.Len() != want.Len() {
			return []string{fmt.Sprintf("%s: got %d elements; want %d", path, got.Len(), want.Len())}
		}
		var out []string
		for i := range got.Len() {
			out = append(out, diff(fmt.Sprintf("%s[%d]", path, i), got.Index(i), want.Index(i))...)
		}
		return out
	case reflect.Map:
		if got.IsNil() != want.IsNil() {
			return leaf()
		}
		keys := map[string]reflect.Value{}
		for _, k := range got.MapKeys() {
			keys[fmt.Sprint(k)] = k
		}
		for _, k := range want.MapKeys() {
			keys[fmt.Sprint(k)] = k
		}
		var out []string
		for _, ks := range slices.Sorted(maps.Keys(keys)) {
			k := keys[ks]
			p := fmt.Sprintf("%s[%q]", path, ks)
			g, w := got.MapIndex(k), want.MapIndex(k)
			switch {
			case !g.IsValid():
				out = append(out, p+": missing")
			case !w.IsValid():
				out = append(out, p+": unexpected")
			default:
				out = append(out, diff(p, g, w)...)
			}
		}
		return out
	}
	return leaf()
}

func show(v reflect.Value) string {
	if v.Kind() == reflect.Pointer && !v.IsNil() {
		return "&" + show(v.Elem())
	}
	if v.Type() == timeType {
		t := v.Interface().(time.Time)
		return t.Format(time.RFC3339Nano) + " (" + t.Location().String() + ")"
	}
	return fmt.Sprintf("%#v", v.Interface())
}
