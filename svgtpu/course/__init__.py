"""The course's code: the worked answers of notebooks 01 and 01b (:mod:`~svgtpu.course.lessons`,
:mod:`~svgtpu.course.lessons_by_hand`) and the checks their exercises run (:mod:`~svgtpu.course.checks`).
Nothing in the package imports it; the production kernels are :mod:`svgtpu.kernels`."""
