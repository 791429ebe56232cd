package pkg

import "testing"

func TestPresent(t *testing.T) {
	for _, name := range []string{"first case", "Second"} {
		t.Run(name, func(t *testing.T) {})
	}
}

func TestAttackOne(t *testing.T)    {}
func BenchmarkPresent(b *testing.B) {}
func FuzzPresent(f *testing.F)      {}
func ExamplePresent_method()        {}
func helperTestLike(t *testing.T)   {}

type notTest struct{}

func (notTest) TestMethod() {}
