package batch

import (
	"reflect"
	"testing"
)

func TestNumbers(t *testing.T) {
	tests := []struct {
		text string
		want []float64
	}{
		{"December grew the most: 26,450 (14.0%) over November.", []float64{26450, 14}},
		{"total 1,845,950.50 dollars", []float64{1845950.5}},
		{"a loss of -3.5 and a gain of +2", []float64{-3.5, 2}},
		{"−12 with a Unicode minus", []float64{-12}},
		{"p = 1.2e-5, n = 3E+2", []float64{1.2e-5, 300}},
		{"about .5 of it", []float64{0.5}},
		{"in 2025-12 and 2025-11", []float64{2025, 12, 2025, 11}},
		{"COVID-19 and x-3", []float64{19, 3}},
		{"pi is 3,14 in France; a list 1,2,3", []float64{3, 14, 1, 2, 3}},
		{"not a group: 1,2345", []float64{1, 2345}},
		{"it was 12.", []float64{12}},
		{"version 1.2.3", []float64{1.2, 3}},
		{"nothing here", nil},
		{"(−0.25)", []float64{-0.25}},
		{"3e, 4e+", []float64{3, 4}},
	}
	for _, tt := range tests {
		var got []float64
		for _, f := range Numbers(tt.text) {
			got = append(got, f.Value)
		}
		if !reflect.DeepEqual(got, tt.want) {
			t.Errorf("Numbers(%q) = %v, want %v", tt.text, got, tt.want)
		}
	}
}

func TestNumbersKeepTheTextAndPercent(t *testing.T) {
	got := Numbers("rose 14.0 % then 26,450 then 5%")
	want := []Found{{"14.0 %", 14, true}, {"26,450", 26450, false}, {"5%", 5, true}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v, want %+v", got, want)
	}
}
