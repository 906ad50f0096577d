package limiter

// SetBeforeTake makes every limiter run f between a key's route and its
// take on the store (nil removes it). Tests that use it must not run in
// parallel with others.
func SetBeforeTake(f func(*Limiter)) { beforeTake = f }
