package proxy

// QuestionFor is the question the gate puts for a call of tool with the
// canonical arguments canon (requeststate.CanonicalArguments) under pol.
func QuestionFor(pol *Policy, tool string, canon []byte) (string, error) {
	return pol.question(tool, canon)
}
