package redisledger

// SetAuditFault makes every audited script of s fail after its record is
// sealed, before any write, while f returns an error.
func SetAuditFault(s *Store, f func() error) { s.auditFault = f }

// AuditLogKey returns the key of s's trail's records.
func AuditLogKey(s *Store) string { return s.auditLog }
