"""Integrity of a campaign's estimates against compromised devices (issue 47): :mod:`.detect`
finds the devices whose stored reports no honest device would likely have sent."""
