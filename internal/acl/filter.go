package acl

import "strings"

// Filter selects bindings (Kafka's AclBindingFilter, the form of DescribeAcls and
// DeleteAcls): ResourceAny, PatternAny, OpAny and PermissionAny match every value, and a
// nil ResourceName, Principal or Host every string. PatternMatch matches the bindings
// that apply to the named resource: LITERAL ones of that name or "*", and PREFIXED ones
// whose prefix the name starts with (ResourcePatternFilter.matches).
type Filter struct {
	ResourceType ResourceType
	ResourceName *string
	PatternType  PatternType
	Principal    *string
	Host         *string
	Operation    Operation
	Permission   Permission
}

// Matches reports whether f selects b.
func (f *Filter) Matches(b *Binding) bool {
	if f.ResourceType != ResourceAny && f.ResourceType != b.ResourceType {
		return false
	}
	if f.PatternType != PatternAny && f.PatternType != PatternMatch && f.PatternType != b.PatternType {
		return false
	}
	if f.ResourceName != nil {
		name := *f.ResourceName
		switch {
		case f.PatternType == PatternAny || f.PatternType == b.PatternType:
			if name != b.ResourceName {
				return false
			}
		case b.PatternType == PatternLiteral:
			if name != b.ResourceName && b.ResourceName != Wildcard {
				return false
			}
		case b.PatternType == PatternPrefixed:
			if !strings.HasPrefix(name, b.ResourceName) {
				return false
			}
		default:
			return false
		}
	}
	return (f.Principal == nil || *f.Principal == b.Principal) &&
		(f.Host == nil || *f.Host == b.Host) &&
		(f.Operation == OpAny || f.Operation == b.Operation) &&
		(f.Permission == PermissionAny || f.Permission == b.Permission)
}

// Validate reports why f cannot select anything (Kafka's AclBindingFilter.findIndefiniteField
// in DeleteAcls and DescribeAcls: an UNKNOWN field), nil when it can.
func (f *Filter) Validate() error {
	switch {
	case f.ResourceType == ResourceUnknown:
		return errUnknown("resource type")
	case f.PatternType == PatternUnknown:
		return errUnknown("pattern type")
	case f.Operation == OpUnknown:
		return errUnknown("operation")
	case f.Permission == PermissionUnknown:
		return errUnknown("permission type")
	}
	return nil
}

type errUnknown string

func (e errUnknown) Error() string { return "filter contains UNKNOWN " + string(e) }
