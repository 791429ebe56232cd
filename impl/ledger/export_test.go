package ledger

// SetAuditFault makes every audited transition of m fail between its
// record and its commit while f returns an error.
func SetAuditFault(m *Memory, f func() error) { m.auditFault = f }
