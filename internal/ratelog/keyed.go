package ratelog

import (
	"sync"
	"time"
)

// Keyed is a Gate per key under Limit, and one Gate for all keys under Total (zero: none),
// for at most MaxKeys keys at once (0: 1024); events of further keys share the zero key
// until Flush forgets idle ones. Safe for concurrent use.
type Keyed[K comparable] struct {
	Limit   Limit
	Total   Limit
	MaxKeys int

	mu    sync.Mutex
	gates map[K]*keyGate
	total Gate
}

type keyGate struct {
	g          Gate
	suppressed int64 // since the last Flush
}

// Suppressed is what Flush reports of one key.
type Suppressed[K comparable] struct {
	Key K
	N   int64
}

// Allow reports whether an event of key at now may be logged; one that may not is counted
// for the next Flush.
func (k *Keyed[K]) Allow(key K, now time.Time) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.gates == nil {
		k.gates = map[K]*keyGate{}
	}
	kg := k.gates[key]
	if kg == nil {
		if len(k.gates) >= k.maxKeys() {
			var zero K
			key = zero
			kg = k.gates[zero]
		}
		if kg == nil {
			kg = &keyGate{}
			k.gates[key] = kg
		}
	}
	ok := kg.g.allowLocked(now, k.Limit)
	if ok && k.Total.Burst > 0 {
		ok = k.total.allowLocked(now, k.Total)
	}
	if !ok {
		kg.suppressed++
	}
	return ok
}

func (k *Keyed[K]) maxKeys() int {
	if k.MaxKeys > 0 {
		return k.MaxKeys
	}
	return 1024
}

// Flush returns the keys with events suppressed since the last Flush, and forgets the keys
// whose bucket has refilled (idle for Burst × Every): the map holds only recent keys.
func (k *Keyed[K]) Flush(now time.Time) []Suppressed[K] {
	k.mu.Lock()
	defer k.mu.Unlock()
	var out []Suppressed[K]
	idle := time.Duration(max(k.Limit.Burst, 1)) * k.Limit.Every
	for key, kg := range k.gates {
		if kg.suppressed > 0 {
			out = append(out, Suppressed[K]{Key: key, N: kg.suppressed})
			kg.suppressed = 0
			continue
		}
		if now.Sub(kg.g.last) >= idle {
			delete(k.gates, key)
		}
	}
	return out
}

// Keys is how many keys are held.
func (k *Keyed[K]) Keys() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return len(k.gates)
}
