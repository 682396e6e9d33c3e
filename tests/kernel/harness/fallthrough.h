#define fallthrough __attribute__((__fallthrough__))
