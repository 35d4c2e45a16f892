DELETE FROM queuebox_capture_state WHERE identity_name = 'queuebox';
