package scale

import "testing"

func TestObjects(t *testing.T) {
	s := Spec{Namespace: "scale", Services: 3, Endpoints: 10}
	seen := map[string]bool{}
	for i := range s.Services {
		svc, es, err := s.Objects(i)
		if err != nil {
			t.Fatal(err)
		}
		if es.Labels["kubernetes.io/service-name"] != svc.Name || len(es.Endpoints) != 10 {
			t.Fatalf("slice %s for %s: %d endpoints", es.Name, svc.Name, len(es.Endpoints))
		}
		for _, e := range es.Endpoints {
			if seen[e.Addresses[0]] {
				t.Fatalf("address %s used twice", e.Addresses[0])
			}
			seen[e.Addresses[0]] = true
		}
	}
	if !seen["10.128.0.0"] || !seen["10.128.0.29"] {
		t.Errorf("addresses %v: want 10.128.0.0 … 10.128.0.29", seen)
	}
	if _, _, err := (Spec{Endpoints: 1 << 20}).Objects(8); err == nil {
		t.Error("no error past the endpoint range")
	}
}
