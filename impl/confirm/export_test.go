package confirm

// RequestedSchema is the question's form, for the benchmark whose bare
// server asks the same question as the Flow; nothing outside the tests
// needs it (a client receives the form on the wire), so it is not on the
// package's surface.
var RequestedSchema = requestedSchema
