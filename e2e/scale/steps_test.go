package scale

import (
	"reflect"
	"testing"
)

func TestParseSteps(t *testing.T) {
	got, err := ParseSteps("1000, 2000,5000")
	if err != nil || !reflect.DeepEqual(got, []int{1000, 2000, 5000}) {
		t.Fatalf("ParseSteps = %v, %v", got, err)
	}
	for _, bad := range []string{"", "1000,", "1000,abc", "0", "-5", "2000,1000", "1000,1000"} {
		if _, err := ParseSteps(bad); err == nil {
			t.Errorf("ParseSteps(%q): no error", bad)
		}
	}
}

func TestParseLevels(t *testing.T) {
	got, err := ParseLevels("0, 100,1000")
	if err != nil || !reflect.DeepEqual(got, []int{0, 100, 1000}) {
		t.Fatalf("ParseLevels = %v, %v", got, err)
	}
	if got, err := ParseLevels("50"); err != nil || !reflect.DeepEqual(got, []int{50}) {
		t.Fatalf("ParseLevels(50) = %v, %v", got, err)
	}
	for _, bad := range []string{"", "0,", "0,x", "-1", "100,0", "0,0"} {
		if _, err := ParseLevels(bad); err == nil {
			t.Errorf("ParseLevels(%q): no error", bad)
		}
	}
}
