package netio

import "time"

// Defaults of publish/subscribe's Config fields.
const (
	// DefaultSlowSubscriberLimit is Config.SlowSubscriberLimit: how long a
	// Block subscriber whose window is full may hold a Publish, and with
	// it the other subscribers of the tag, before the publisher cuts it
	// loose.
	DefaultSlowSubscriberLimit = 3 * time.Second
	// DefaultEventBuffer is Config.EventBuffer: the events a Subscription
	// or Publisher holds for a reader of Events.
	DefaultEventBuffer = 64
)

func (c *Config) setPubSubDefaults() {
	orDefault(&c.SlowSubscriberLimit, DefaultSlowSubscriberLimit)
	orDefault(&c.EventBuffer, DefaultEventBuffer)
}

func (c *Config) checkPubSub() error {
	switch {
	case c.MaxReconnects < 0:
		return invalid("reconnect limit %d is negative (0 is no limit)", c.MaxReconnects)
	case c.MaxReconnectTime < 0:
		return invalid("reconnect time %v is negative (0 is no limit)", c.MaxReconnectTime)
	}
	return checkPositive("event buffer", int64(c.EventBuffer))
}

// WithSlowSubscriberLimit sets Config.SlowSubscriberLimit. A d of zero or
// less waits for ever: a Block subscriber that stops reading then holds
// every Publish of its tags for as long as the Publish's context allows.
func WithSlowSubscriberLimit(d time.Duration) Option {
	return func(c *Config) error {
		if d <= 0 {
			d = -1
		}
		c.SlowSubscriberLimit = d
		return nil
	}
}

// WithWaitForPublisher sets Config.WaitForPublisher: Subscribe keeps
// trying until its context ends when the publisher is not up yet.
func WithWaitForPublisher() Option {
	return func(c *Config) error { c.WaitForPublisher = true; return nil }
}

// WithMaxReconnects sets Config.MaxReconnects; 0 is no limit.
func WithMaxReconnects(n int) Option {
	return func(c *Config) error {
		c.MaxReconnects = n
		if n < 0 {
			return invalid("reconnect limit %d is negative (0 is no limit)", n)
		}
		return nil
	}
}

// WithMaxReconnectTime sets Config.MaxReconnectTime; 0 is no limit.
func WithMaxReconnectTime(d time.Duration) Option {
	return func(c *Config) error {
		c.MaxReconnectTime = d
		if d < 0 {
			return invalid("reconnect time %v is negative (0 is no limit)", d)
		}
		return nil
	}
}

// WithEventBuffer sets Config.EventBuffer.
func WithEventBuffer(n int) Option {
	return func(c *Config) error { c.EventBuffer = n; return checkPositive("event buffer", int64(n)) }
}
