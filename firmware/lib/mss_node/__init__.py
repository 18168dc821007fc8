"""The device application: config, state, report scheduling and transports."""
