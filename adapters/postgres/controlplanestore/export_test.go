package controlplanestore

// CompleteEnrollmentSQL is the enrolment statement, for its plan test.
const CompleteEnrollmentSQL = completeEnrollmentSQL
